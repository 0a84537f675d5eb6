package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/xdstls"
)

// startServer runs a webhook Server on a loopback port with the certificate in dir.
func startServer(t *testing.T, dir string, log *testutil.SyncBuffer) string {
	t.Helper()
	s, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", CertDir: dir, Handler: NewHandler(Config{}), Logger: testLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
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

// certgen writes a new CA and serving certificate for 127.0.0.1 into dir, as
// `portico certgen --webhook` does, and returns the CA.
func certgen(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	if err := xdstls.GenerateWebhook(dir, []string{"127.0.0.1"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, xdstls.WebhookCACertFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return pool
}

// mount writes a new certificate into dir the way the kubelet updates a Secret
// volume: into a new directory, then an atomic swap of the ..data symlink that tls.crt
// and tls.key point through. It returns the new CA.
func mount(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	gen := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
	ca := certgen(t, gen)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(gen), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{CertFile, KeyFile} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
	return ca
}

// call sends an AdmissionReview over a new TLS connection that trusts only ca, as the
// API server does with a caBundle.
func call(addr string, ca *x509.CertPool) (*admissionv1.AdmissionResponse, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	body := review(&admissionv1.AdmissionRequest{UID: "u1", Kind: ingressKind, Operation: admissionv1.Create, Name: "web", Namespace: "apps",
		Object: rawJSON(badPathType)})
	resp, err := client.Post("https://"+addr+Path, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out.Response, nil
}

func TestServerOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certgen(t, dir)
	addr := startServer(t, dir, &testutil.SyncBuffer{})
	resp, err := call(addr, ca)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || !strings.HasPrefix(resp.Result.Message, "not served: ") {
		t.Errorf("response %+v", resp)
	}
	if _, err := call(addr, x509.NewCertPool()); err == nil {
		t.Error("a client that does not trust the CA got an answer")
	}
}

// TestServerPicksUpRotatedCertificate: new connections get the certificate that is in
// the directory now, as when cert-manager renews a Secret that is mounted as a volume.
func TestServerPicksUpRotatedCertificate(t *testing.T) {
	dir := t.TempDir()
	oldCA := mount(t, dir)
	log := &testutil.SyncBuffer{}
	addr := startServer(t, dir, log)
	if _, err := call(addr, oldCA); err != nil {
		t.Fatal(err)
	}
	newCA := mount(t, dir)
	if _, err := call(addr, newCA); err != nil {
		t.Fatalf("after rotation, with the new CA: %v", err)
	}
	if _, err := call(addr, oldCA); err == nil {
		t.Error("after rotation, the old certificate is still served")
	}

	// A certificate that does not load (a key file rewritten in place, a bad copy)
	// leaves the last good pair in service.
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := call(addr, newCA); err != nil {
		t.Errorf("with an unreadable key: %v", err)
	}
	if !strings.Contains(log.String(), "serving the previous one") {
		t.Errorf("no warning logged:\n%s", log)
	}
}

// TestServerWaitsForItsCertificate: an empty directory (a Secret volume marked optional,
// before the Secret exists) does not stop the server; handshakes fail until the files
// appear, and then succeed without a restart.
func TestServerWaitsForItsCertificate(t *testing.T) {
	dir := t.TempDir()
	log := &testutil.SyncBuffer{}
	addr := startServer(t, dir, log)
	if !strings.Contains(log.String(), "failurePolicy") {
		t.Errorf("no warning that the certificate is missing:\n%s", log)
	}
	if _, err := call(addr, x509.NewCertPool()); err == nil {
		t.Fatal("a handshake succeeded without a certificate")
	}
	ca := mount(t, dir)
	if _, err := call(addr, ca); err != nil {
		t.Errorf("once the certificate exists: %v", err)
	}
}

func TestNewServerChecksTheDirectory(t *testing.T) {
	for _, dir := range []string{"", filepath.Join(t.TempDir(), "missing")} {
		if _, err := NewServer(ServerConfig{Addr: "127.0.0.1:0", CertDir: dir, Handler: NewHandler(Config{})}); err == nil {
			t.Errorf("NewServer with cert dir %q: no error", dir)
		}
	}
}

var ingressKind = metav1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}

func rawJSON(doc string) runtime.RawExtension {
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: js}
}

func testLogger(w *testutil.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
