package xdstls

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestGenerateWebhook: the files are what a kubernetes.io/tls Secret and a caBundle
// need, the key is private, the CA's key is not kept, and the certificate is valid for
// the names asked for (and only those) as a server.
func TestGenerateWebhook(t *testing.T) {
	dir := t.TempDir()
	names := []string{"portico-webhook.portico-system.svc", "127.0.0.1"}
	if err := GenerateWebhook(dir, names, time.Hour); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	if want := []string{"ca.crt", "tls.crt", "tls.key"}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, WebhookKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v, mode %v; want mode 0600", err, fi.Mode().Perm())
	}

	pool, err := loadPool(filepath.Join(dir, WebhookCACertFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := readLeaf(filepath.Join(dir, WebhookCertFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("not valid for %s: %v", name, err)
		}
	}
	for _, name := range []string{"localhost", "portico.portico-system.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err == nil {
			t.Errorf("valid for %s, which was not asked for", name)
		}
	}
	if ok, err := AllowsClientAuth(filepath.Join(dir, WebhookCertFile)); err != nil || ok {
		t.Errorf("allows client auth: %v, %v", ok, err)
	}
}

func TestGenerateWebhookNeedsAName(t *testing.T) {
	if err := GenerateWebhook(t.TempDir(), []string{""}, time.Hour); err == nil {
		t.Error("no error without a server name")
	}
	if err := GenerateWebhook(t.TempDir(), []string{"x.svc"}, 0); err == nil {
		t.Error("no error with a zero validity")
	}
}
