package echo

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeKeyPair writes a self-signed certificate for 127.0.0.1 and its key as
// PEM files, and returns their paths and a pool trusting the certificate.
func writeKeyPair(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "echo.test"},
		DNSNames:     []string{"echo.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// TestTLS: with a certificate the server speaks HTTPS, h2 or HTTP/1.1 as
// ALPN negotiates, and says so in proto and tls.
func TestTLS(t *testing.T) {
	certFile, keyFile, roots := writeKeyPair(t)
	s := startServer(t, Config{Service: "secure", TLSCertFile: certFile, TLSKeyFile: keyFile})
	for _, tc := range []struct {
		name      string
		protocols func(p *http.Protocols)
		want      string
	}{
		{"h2 by ALPN", func(p *http.Protocols) { p.SetHTTP1(true); p.SetHTTP2(true) }, "HTTP/2.0"},
		{"HTTP/1.1 by ALPN", func(p *http.Protocols) { p.SetHTTP1(true) }, "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var protos http.Protocols
			tc.protocols(&protos)
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "echo.test"}, Protocols: &protos}
			defer tr.CloseIdleConnections()
			resp, body := do(t, &http.Client{Transport: tr}, newRequest(t, http.MethodGet, "https://"+s.Addr()+"/x"))
			got := decode(t, body)
			if resp.Proto != tc.want || got.Proto != tc.want || !got.TLS || got.Service != "secure" || got.Path != "/x" {
				t.Errorf("response %s, echo %+v; want %s over TLS", resp.Proto, got, tc.want)
			}
		})
	}
	t.Run("clear text is refused", func(t *testing.T) {
		resp, err := http.Get("http://" + s.Addr() + "/")
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("plain HTTP to the TLS server: %d, want net/http's 400", resp.StatusCode)
			}
		}
	})
}

func TestTLSBadKeyPair(t *testing.T) {
	certFile, _, _ := writeKeyPair(t)
	err := New(Config{Listen: "127.0.0.1:0", Service: "x", TLSCertFile: certFile, TLSKeyFile: filepath.Join(t.TempDir(), "missing.key")}).Start()
	if err == nil || !strings.Contains(err.Error(), "TLS certificate") {
		t.Fatalf("Start with a missing key: %v, want a TLS certificate error", err)
	}
}
