package e2e

import (
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/testutil"
)

// clientPKI is a CA for client certificates, two clients it issued (one of them
// revoked), the CRL saying so, and a client of another CA.
type clientPKI struct {
	ca             *pki.CA
	alice, mallory *pki.Leaf
	stranger       *pki.Leaf
	crlPEM         []byte
}

func newClientPKI(t *testing.T) *clientPKI {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("clients-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := pki.NewCA("other-ca", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(ca *pki.CA, cn string, names ...string) *pki.Leaf {
		l, err := ca.Issue(cn, names, pki.ClientAuth, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	p := &clientPKI{ca: ca, alice: issue(ca, "alice"), mallory: issue(ca, "mallory"), stranger: issue(otherCA, "stranger")}
	blk, _ := pem.Decode(ca.KeyPEM)
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateRevocationList(nil, &x509.RevocationList{
		Number:     big.NewInt(1),
		ThisUpdate: now.Add(-time.Minute),
		NextUpdate: now.Add(time.Hour),
		RevokedCertificateEntries: []x509.RevocationListEntry{
			{SerialNumber: p.mallory.Cert.SerialNumber, RevocationTime: now.Add(-time.Minute)},
		},
	}, ca.Cert, key.(crypto.Signer))
	if err != nil {
		t.Fatal(err)
	}
	p.crlPEM = pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
	return p
}

func (p *clientPKI) pair(t *testing.T, l *pki.Leaf) *tls.Certificate {
	t.Helper()
	c, err := l.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// getMTLS sends GET https://host/path presenting cert (nil: none); the error is the
// handshake's or the request's.
func (e *env) getMTLS(host, path string, cert *tls.Certificate, header ...string) (result, error) {
	tr := httpsTransport(e, host)
	if cert != nil {
		// Sent whatever CAs the server says it accepts (Go's client would otherwise
		// send nothing for a certificate of another CA).
		tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return fetch(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
}

func opaqueSecretManifest(ns, name, key string, data []byte) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\ndata:\n  %s: %s\n",
		name, ns, key, base64.StdEncoding.EncodeToString(data))
}

// TestHTTPProxyClientValidation: spec.virtualhost.tls.clientValidation, through the
// embedded proxy. A host with caSecret and crlSecret takes only its CA's clients that
// are not revoked, and forwards the certificate's details upstream in
// x-forwarded-client-cert (never the client's own header); optionalClientCertificate
// also lets clients without a certificate in; skipClientCertValidation takes any
// certificate but still requires one.
func TestHTTPProxyClientValidation(t *testing.T) {
	t.Parallel()
	p := newClientPKI(t)
	hosts := []string{"mtls.example.com", "optional.example.com", "skip.example.com"}
	docs := []string{backends(t, "mtls/app"), opaqueSecretManifest("mtls", "client-ca", "ca.crt", p.ca.CertPEM),
		opaqueSecretManifest("mtls", "client-crl", "crl.pem", p.crlPEM)}
	for _, h := range hosts {
		docs = append(docs, tlsSecretManifestIn("mtls", strings.Split(h, ".")[0], testutil.SelfSigned(h)))
	}
	e := start(t, map[string]string{
		"backends.yaml": strings.Join(docs, "---\n"),
		"proxies.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: mtls, namespace: mtls}
spec:
  virtualhost:
    fqdn: mtls.example.com
    tls:
      secretName: mtls
      clientValidation:
        caSecret: client-ca
        crlSecret: client-crl
        forwardClientCertificate: {subject: true, cert: true, dns: true}
  routes:
  - services: [{name: app, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: optional, namespace: mtls}
spec:
  virtualhost:
    fqdn: optional.example.com
    tls:
      secretName: optional
      clientValidation: {caSecret: client-ca, optionalClientCertificate: true}
  routes:
  - services: [{name: app, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: skip, namespace: mtls}
spec:
  virtualhost:
    fqdn: skip.example.com
    tls:
      secretName: skip
      clientValidation:
        skipClientCertValidation: true
        forwardClientCertificate: {subject: true}
  routes:
  - services: [{name: app, port: 80}]
`,
	})
	alice, mallory, stranger := p.pair(t, p.alice), p.pair(t, p.mallory), p.pair(t, p.stranger)
	e.eventually(20*time.Second, "mtls.example.com served to alice", func() bool {
		r, err := e.getMTLS("mtls.example.com", "/", alice)
		return err == nil && r.status == http.StatusOK
	})

	r, err := e.getMTLS("mtls.example.com", "/", alice, "X-Forwarded-Client-Cert", "By=forged;Hash=00")
	if err != nil || r.service() != "app" {
		t.Fatalf("alice on mtls.example.com: %v %+v", err, r)
	}
	sum := sha256.Sum256(p.alice.Cert.Raw)
	xfcc := r.echo.Headers["X-Forwarded-Client-Cert"]
	wantPEM := strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D").Replace(string(p.alice.CertPEM))
	want := `Hash=` + hex.EncodeToString(sum[:]) + `;Cert="` + wantPEM + `";Subject="CN=alice"`
	if len(xfcc) != 1 || xfcc[0] != want {
		t.Errorf("x-forwarded-client-cert upstream = %q, want %q (the client's own header removed)", xfcc, want)
	}
	if got, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(strings.Split(xfcc[0], ";")[1], `Cert="`), `"`)); err != nil || got != string(p.alice.CertPEM) {
		t.Errorf("the Cert of x-forwarded-client-cert does not decode to alice's certificate: %v", err)
	}
	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "a revoked certificate": mallory, "another CA's certificate": stranger} {
		if r, err := e.getMTLS("mtls.example.com", "/", cert); err == nil {
			t.Errorf("mtls.example.com with %s: answered %d, want the handshake refused", name, r.status)
		}
	}

	if r, err := e.getMTLS("optional.example.com", "/", nil, "X-Forwarded-Client-Cert", "Hash=forged"); err != nil || r.service() != "app" || r.echo.Headers["X-Forwarded-Client-Cert"] != nil {
		t.Errorf("optional.example.com without a certificate: %v %+v (want app, and no x-forwarded-client-cert)", err, r)
	}
	if r, err := e.getMTLS("optional.example.com", "/", alice); err != nil || r.service() != "app" {
		t.Errorf("optional.example.com with alice's certificate: %v %+v", err, r)
	}
	if r, err := e.getMTLS("optional.example.com", "/", stranger); err == nil {
		t.Errorf("optional.example.com with another CA's certificate: answered %d, want the handshake refused", r.status)
	}

	r, err = e.getMTLS("skip.example.com", "/", stranger)
	if err != nil || r.service() != "app" {
		t.Fatalf("skip.example.com with any certificate: %v %+v", err, r)
	}
	if got := r.echo.Headers["X-Forwarded-Client-Cert"]; len(got) != 1 || !strings.HasSuffix(got[0], `;Subject="CN=stranger"`) {
		t.Errorf("skip.example.com forwarded %q, want the stranger's subject", got)
	}
	if r, err := e.getMTLS("skip.example.com", "/", nil); err == nil {
		t.Errorf("skip.example.com without a certificate: answered %d, want the handshake refused (a certificate is still required)", r.status)
	}
}
