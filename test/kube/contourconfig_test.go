package kube

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestServeContourConfigFile: `portico serve --config` with a file laid out as Contour's
// configuration file (its kubeconfig, TLS fallback certificate, minimum TLS version and
// Server header settings, next to Portico's flag names) is what the embedded proxy
// serves against a real API server: a client without SNI gets the fallback certificate
// over TLS 1.3 only, and responses carry no Server header of Portico's.
func TestServeContourConfigFile(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 1)
	backend(t, pn, "web", 9121)
	const ns = "contourcfg"
	createNamespace(t, c, ns)
	createService(t, c, ns, "web", pn.PodIP, 9121)
	for name, cert := range map[string]testutil.Cert{"fallback": testutil.SelfSigned("fallback.contourcfg.test"), "legacy": testutil.SelfSigned("legacy.contourcfg.test")} {
		if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: cert.CertPEM, corev1.TLSPrivateKeyKey: cert.KeyPEM}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := createHTTPProxyJSON(ctx, cc, ns, "legacy", `{"virtualhost": {"fqdn": "legacy.contourcfg.test",
		"tls": {"secretName": "legacy", "enableFallbackCertificate": true}},
		"routes": [{"services": [{"name": "web", "port": 80}]}]}`); err != nil {
		t.Fatal(err)
	}
	httpAddr, httpsAddr, adminAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	config := filepath.Join(t.TempDir(), "contour.yaml")
	if err := os.WriteFile(config, []byte(`kubeconfig: `+env.Kubeconfig+`
tls:
  fallback-certificate: {namespace: contourcfg, name: fallback}
  minimum-protocol-version: "1.3"
serverHeaderTransformation: pass_through
watch-namespaces: [contourcfg]
leader-elect: false
`), 0o644); err != nil {
		t.Fatal(err)
	}
	runServe(t, "serve", "--config", config, "--embedded-proxy", "--http-addr", httpAddr, "--https-addr", httpsAddr,
		"--xds-addr", testutil.FreeAddr(t), "--admin-addr", adminAddr, "--log-level", "warn")
	eventually(t, 30*time.Second, "serve to become ready", func() bool { return readyz(adminAddr) })

	noSNI := func(max uint16) (*http.Response, error) {
		tr := &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: max}, // self-signed test certificates; an IP address sends no SNI
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, httpsAddr)
			}}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, "https://"+httpsAddr+"/", nil)
		req.Host = "legacy.contourcfg.test"
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	var resp *http.Response
	eventually(t, 30*time.Second, "legacy.contourcfg.test served without SNI", func() bool {
		var err error
		resp, err = noSNI(tls.VersionTLS13)
		return err == nil && resp.StatusCode == http.StatusOK
	})
	if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != "fallback.contourcfg.test" {
		t.Errorf("without SNI: certificate %q, want the fallback certificate of tls.fallback-certificate", cn)
	}
	if s, ok := resp.Header["Server"]; ok {
		t.Errorf("serverHeaderTransformation: pass_through: Server %q, want none", s)
	}
	if _, err := noSNI(tls.VersionTLS12); err == nil {
		t.Errorf("tls.minimum-protocol-version 1.3: a TLS 1.2 client was served the fallback certificate")
	}
}
