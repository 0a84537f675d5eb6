package testutil

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/echo"
)

// StartEcho starts a `portico echo` backend with cfg (Listen defaults to an ephemeral
// loopback port), stops it when the test ends, and returns its address.
func StartEcho(t testing.TB, cfg echo.Config) string {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s := echo.New(cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s.Addr()
}

// StartTLSEcho is StartEcho serving TLS with cert (h2 and HTTP/1.1 by ALPN), as
// `portico echo --tls-cert --tls-key` does.
func StartTLSEcho(t testing.TB, cfg echo.Config, cert Cert) string {
	t.Helper()
	cfg.TLSCertFile, cfg.TLSKeyFile = CertFiles(t, cert)
	return StartEcho(t, cfg)
}

// CertFiles writes cert's certificate and key as PEM files in a temporary directory,
// as a server's --tls-cert and --tls-key read them, and returns their paths.
func CertFiles(t testing.TB, cert Cert) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, cert.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
