package e2e

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// Connections to TLS backends go up to TLS 1.3 by default, as Contour's: a
// backend that speaks only TLS 1.3 is reached (Envoy's client default alone
// would stop at TLS 1.2 and fail the handshake).
func TestUpstreamTLS13ByDefault(t *testing.T) {
	t.Parallel()
	cert := testutil.SelfSigned("tls13.example.com")
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.TLS.Version != tls.VersionTLS13 {
			http.Error(w, "not TLS 1.3", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("tls 1.3\n"))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	e := start(t, map[string]string{
		"backend.yaml": serviceManifest("t", "tls13", srv.Listener.Addr().String()),
		"proxy.yaml": `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: tls13, namespace: t}
spec:
  virtualhost: {fqdn: tls13.example.com}
  routes:
  - services: [{name: tls13, port: 80, protocol: tls}]
`,
	})
	e.eventually(30*time.Second, "the TLS 1.3-only backend to answer", func() bool {
		r := e.get("tls13.example.com", "/")
		return r.status == http.StatusOK && r.body == "tls 1.3\n"
	})
}
