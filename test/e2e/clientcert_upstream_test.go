package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/testutil"
)

// Contour's tls.envoy-client-certificate: the Secret's certificate is presented to a
// backend over TLS that requires it, and a change of the Secret's file is applied
// while running; without the setting the backend refuses Portico.
func TestRunEnvoyClientCertificate(t *testing.T) {
	t.Parallel()
	client, other := testutil.SelfSigned("envoy.infra"), testutil.SelfSigned("someone.else")
	backend := startClientCertBackend(t, testutil.SelfSigned("backend.cc.svc"), client)
	manifests := map[string]string{
		"backend.yaml": serviceManifest("cc", "secure", backend) + `---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: mtls, namespace: cc}
spec:
  virtualhost: {fqdn: mtls.cc.test}
  routes: [{services: [{name: secure, port: 80, protocol: tls}]}]
`,
		"secret.yaml": tlsSecretManifestIn("infra", "envoy-client", client),
	}
	r := runWithConfig(t, manifests, "tls:\n  envoy-client-certificate: {namespace: infra, name: envoy-client}\n")
	r.eventually("the backend to accept Portico's certificate", func() bool { return r.get("mtls.cc.test", "/").status == http.StatusOK })

	if err := os.WriteFile(filepath.Join(r.dir, "secret.yaml"), []byte(tlsSecretManifestIn("infra", "envoy-client", other)), 0o644); err != nil {
		t.Fatal(err)
	}
	r.eventually("the changed Secret, a certificate the backend refuses, to be presented", func() bool { return r.get("mtls.cc.test", "/").status >= 500 })

	// A Secret that cannot be used shows on the HTTPProxies that speak TLS to their
	// backends, as in Contour: they are invalid and not served until it is fixed.
	secretFile := filepath.Join(r.dir, "secret.yaml")
	if err := os.Remove(secretFile); err != nil {
		t.Fatal(err)
	}
	r.eventually("mtls's status to name the missing Secret", func() bool {
		st, desc := r.objectStatus("HTTPProxy", "cc", "mtls")
		return st == "invalid" && strings.Contains(desc, "--envoy-client-certificate infra/envoy-client") && strings.Contains(desc, "Secret infra/envoy-client not found")
	})
	if res := r.get("mtls.cc.test", "/"); res.status != http.StatusNotFound {
		t.Errorf("with the Secret missing: %d, want 404 (the HTTPProxy is not served)", res.status)
	}
	broken := strings.Replace(tlsSecretManifestIn("infra", "envoy-client", client), "tls.key:", "tls.key: bm90IGEga2V5 #", 1)
	if err := os.WriteFile(secretFile, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	r.eventually("mtls's status to say the Secret is invalid", func() bool {
		st, desc := r.objectStatus("HTTPProxy", "cc", "mtls")
		return st == "invalid" && strings.Contains(desc, "Secret infra/envoy-client: invalid certificate or key")
	})
	if err := os.WriteFile(secretFile, []byte(tlsSecretManifestIn("infra", "envoy-client", client)), 0o644); err != nil {
		t.Fatal(err)
	}
	r.eventually("mtls to be valid and served again", func() bool {
		st, _ := r.objectStatus("HTTPProxy", "cc", "mtls")
		return st == "valid" && r.get("mtls.cc.test", "/").status == http.StatusOK
	})

	without := runWithConfig(t, manifests, "log-level: info\n")
	without.eventually("mtls.cc.test to be served", func() bool { return without.get("mtls.cc.test", "/").status != http.StatusNotFound })
	if res := without.get("mtls.cc.test", "/"); res.status < 500 {
		t.Errorf("without envoy-client-certificate: %d, want a connect failure (5xx): the backend requires a certificate", res.status)
	}
}

// startClientCertBackend serves HTTPS with cert, accepting only connections that
// present want; every request is a new connection, so that a changed certificate
// shows at once.
func startClientCertBackend(t *testing.T, cert, want testutil.Cert) string {
	t.Helper()
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(want.CertPEM)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("mtls\n")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAnyClientCert,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], block.Bytes) {
				return errors.New("not the expected client certificate")
			}
			return nil
		}}
	srv.Config.SetKeepAlivesEnabled(false)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}
