package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
)

// Dynamic header values, as a Contour user writes them in HTTPProxy headers policies:
// each variable's value reaches the backend (and the client, for response headers) as
// Envoy gives it, over plain HTTP and over TLS with a client certificate; a route's Host
// of %REQ(name)% takes the Host from that request header.

const dynamicProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: dyn, namespace: dyn}
spec:
  virtualhost:
    fqdn: dyn.example.com
    tls:
      secretName: dyn
      clientValidation: {caSecret: client-ca, optionalClientCertificate: true}
  routes:
  - conditions: [{prefix: /vars}]
    permitInsecure: true
    services:
    - name: app
      port: 80
      requestHeadersPolicy:
        set: [{name: x-service, value: "%CONTOUR_SERVICE_NAME%.%CONTOUR_NAMESPACE%:%CONTOUR_SERVICE_PORT%"}]
    requestHeadersPolicy:
      set:
      - {name: x-host, value: "%REQ(Host)%"}
      - {name: x-alt, value: "%REQ(x-missing?x-in)%"}
      - {name: x-short, value: "%REQ(x-in):3%"}
      - {name: x-protocol, value: "%PROTOCOL%"}
      - {name: x-remote, value: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"}
      - {name: x-local-port, value: "%DOWNSTREAM_LOCAL_PORT%"}
      - {name: x-peer-subject, value: "%DOWNSTREAM_PEER_SUBJECT%"}
      - {name: x-peer-issuer, value: "%DOWNSTREAM_PEER_ISSUER%"}
      - {name: x-peer-fingerprint, value: "%DOWNSTREAM_PEER_FINGERPRINT_256%"}
      - {name: x-peer-serial, value: "%DOWNSTREAM_PEER_SERIAL%"}
      - {name: x-tls-version, value: "%DOWNSTREAM_TLS_VERSION%"}
      - {name: x-tls-cipher, value: "%DOWNSTREAM_TLS_CIPHER%"}
      - {name: x-namespace, value: "%CONTOUR_NAMESPACE%"}
      - {name: x-route-service, value: "%CONTOUR_SERVICE_NAME%"}
      - {name: x-literal, value: "%START_TIME% 5%"}
    responseHeadersPolicy:
      set:
      - {name: x-upstream, value: "%UPSTREAM_REMOTE_ADDRESS%"}
      - {name: x-flags, value: "%RESPONSE_FLAGS%"}
      - {name: x-details, value: "%RESPONSE_CODE_DETAILS%"}
  - conditions: [{prefix: /rewrite}]
    permitInsecure: true
    services: [{name: app, port: 80}]
    requestHeadersPolicy:
      set: [{name: Host, value: "%REQ(x-rewrite)%"}]
`

func TestHTTPProxyDynamicHeaderValues(t *testing.T) {
	t.Parallel()
	p := newClientPKI(t)
	e := start(t, map[string]string{
		"backends.yaml": strings.Join([]string{backends(t, "dyn/app"), opaqueSecretManifest("dyn", "client-ca", "ca.crt", p.ca.CertPEM),
			tlsSecretManifestIn("dyn", "dyn", testutil.SelfSigned("dyn.example.com"))}, "---\n"),
		"proxy.yaml": dynamicProxy,
	})
	const host = "dyn.example.com"
	wantStatus(t, proxyStatuses(t, e.dir, dag.Options{}), "dyn/dyn", dag.StatusValid, "")
	alice := p.pair(t, p.alice)
	e.eventually(20*time.Second, host+" served over TLS", func() bool {
		r, err := e.getMTLS(host, "/vars", alice)
		return err == nil && r.status == http.StatusOK
	})

	requestHeaders := []string{"X-Host", "X-Alt", "X-Short", "X-Protocol", "X-Remote", "X-Local-Port", "X-Peer-Subject", "X-Peer-Issuer",
		"X-Peer-Fingerprint", "X-Peer-Serial", "X-Tls-Version", "X-Namespace", "X-Route-Service", "X-Literal", "X-Service"}
	seen := func(r result) map[string]string {
		got := map[string]string{}
		for _, name := range requestHeaders {
			got[name] = strings.Join(r.echo.Headers[name], ",")
		}
		for _, name := range []string{"X-Upstream", "X-Flags", "X-Details"} {
			got[name] = r.header.Get(name)
		}
		return got
	}
	port := func(addr string) string {
		_, p, _ := net.SplitHostPort(addr)
		return p
	}
	common := map[string]string{
		"X-Host": host, "X-Alt": "input", "X-Short": "inp", "X-Protocol": "HTTP/1.1", "X-Remote": "127.0.0.1",
		"X-Namespace": "dyn", "X-Route-Service": "%CONTOUR_SERVICE_NAME%", "X-Literal": "%START_TIME% 5%", "X-Service": "app.dyn:80",
		"X-Flags": "-", "X-Details": "via_upstream",
	}

	// Plain HTTP: the TLS values are empty, which leaves their headers out.
	r := e.get(host, "/vars", "X-In", "input")
	want := map[string]string{"X-Local-Port": port(e.httpAddr()), "X-Upstream": r.echo.Endpoint,
		"X-Peer-Subject": "", "X-Peer-Issuer": "", "X-Peer-Fingerprint": "", "X-Peer-Serial": "", "X-Tls-Version": ""}
	for k, v := range common {
		want[k] = v
	}
	if diff := cmp.Diff(want, seen(r)); diff != "" {
		t.Errorf("plain HTTP (-want +got):\n%s", diff)
	}

	// TLS with alice's certificate.
	r, err := e.getMTLS(host, "/vars", alice, "X-In", "input")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p.alice.Cert.Raw)
	want = map[string]string{"X-Local-Port": port(e.httpsAddr()), "X-Upstream": r.echo.Endpoint,
		"X-Peer-Subject": "CN=alice", "X-Peer-Issuer": "CN=" + p.ca.Cert.Subject.CommonName, "X-Peer-Fingerprint": hex.EncodeToString(sum[:]),
		"X-Peer-Serial": hex.EncodeToString(p.alice.Cert.SerialNumber.Bytes()), "X-Tls-Version": "TLSv1.3"}
	for k, v := range common {
		want[k] = v
	}
	if diff := cmp.Diff(want, seen(r)); diff != "" {
		t.Errorf("TLS with a client certificate (-want +got):\n%s", diff)
	}
	if got := r.echo.Headers["X-Tls-Cipher"]; len(got) != 1 || !slices.Contains([]string{"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}, got[0]) {
		t.Errorf("%%DOWNSTREAM_TLS_CIPHER%% over TLS 1.3 = %q, want a TLS 1.3 suite's name", got)
	}

	// The Host from a request header; kept when the request has none.
	for _, tc := range []struct{ header, want string }{{"other.example.com", "other.example.com"}, {"", host}} {
		var r result
		if tc.header != "" {
			r = e.get(host, "/rewrite", "X-Rewrite", tc.header)
		} else {
			r = e.get(host, "/rewrite")
		}
		if r.service() != "app" || r.echo.Host != tc.want {
			t.Errorf("/rewrite with X-Rewrite %q: answered by %q with Host %q, want app with %q", tc.header, r.service(), r.echo.Host, tc.want)
		}
	}
}
