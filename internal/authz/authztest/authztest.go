// Package authztest starts `portico authz` servers for tests, apart from testutil so
// that the modules importing testutil (the Helm chart's tests) need not build gRPC
// and the htpasswd library.
package authztest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/portico-dev/portico/internal/authz"
	"github.com/portico-dev/portico/internal/testutil"
)

// HTPasswd writes an htpasswd file of users (name → password, bcrypt-hashed) into a
// temporary directory and returns its path.
func HTPasswd(t testing.TB, users map[string]string) string {
	t.Helper()
	var lines []string
	for name, password := range users {
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, name+":"+string(hash))
	}
	path := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// StartAuthz starts a `portico authz` server with cfg (Listen defaults to an ephemeral
// loopback port; HTPasswd to a file of users) and stops it when the test ends.
func StartAuthz(t testing.TB, cfg authz.Config, users map[string]string) *authz.Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.HTPasswd == "" {
		cfg.HTPasswd = HTPasswd(t, users)
	}
	s, err := authz.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// StartTLSAuthz is StartAuthz serving gRPC over TLS with cert, as `portico authz
// --tls-cert --tls-key` does.
func StartTLSAuthz(t testing.TB, cfg authz.Config, users map[string]string, cert testutil.Cert) *authz.Server {
	t.Helper()
	cfg.TLSCertFile, cfg.TLSKeyFile = testutil.CertFiles(t, cert)
	return StartAuthz(t, cfg, users)
}

// StartHTTPAuthz is StartAuthz answering HTTP checks too, as `portico authz
// --http-listen` does, on an ephemeral loopback port (Server.HTTPAddr).
func StartHTTPAuthz(t testing.TB, cfg authz.Config, users map[string]string) *authz.Server {
	t.Helper()
	if cfg.HTTPListen == "" {
		cfg.HTTPListen = "127.0.0.1:0"
	}
	return StartAuthz(t, cfg, users)
}
