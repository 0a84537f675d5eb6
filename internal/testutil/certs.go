// Package testutil holds helpers shared by tests of several packages.
package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"time"
)

// Cert is a PEM certificate and its key.
type Cert struct {
	CertPEM []byte
	KeyPEM  []byte
}

// SelfSigned returns a certificate valid for hosts (DNS names, wildcards allowed) for
// one day, signed by its own key. It panics on failure: it is for tests only.
func SelfSigned(hosts ...string) Cert {
	return selfSigned(time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), hosts, nil)
}

// SelfSignedWithURIs is SelfSigned with URI SANs as well (SPIFFE IDs, say). It panics
// on a URI that does not parse.
func SelfSignedWithURIs(uris []string, hosts ...string) Cert {
	parsed := make([]*url.URL, len(uris))
	for i, u := range uris {
		var err error
		if parsed[i], err = url.Parse(u); err != nil {
			panic(err)
		}
	}
	return selfSigned(time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), hosts, parsed)
}

// Expired returns a certificate for hosts that expired an hour ago.
func Expired(hosts ...string) Cert {
	return selfSigned(time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), hosts, nil)
}

func selfSigned(notBefore, notAfter time.Time, hosts []string, uris []*url.URL) Cert {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: hosts[0]},
		DNSNames:              hosts,
		URIs:                  uris,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return Cert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}
