package kube

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestServeJWT: in serve mode, an HTTPProxy with a JWT provider whose key set a
// real JWKS server holds: the embedded proxy answers 401 without a token and
// forwards a request whose token the key set verifies.
func TestServeJWT(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 1)
	const ns = "jwt"
	createNamespace(t, c, ns)
	backend(t, pn, "api", 9111)
	createService(t, c, ns, "api", pn.PodIP, 9111)
	cert := testutil.SelfSigned("api.jwt.test")
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert.CertPEM, corev1.TLSPrivateKeyKey: cert.KeyPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jwks := testutil.StartJWKS(t, testutil.NonLoopbackIP(t))
	spec := `{"virtualhost": {"fqdn": "api.jwt.test", "tls": {"secretName": "api"},
		"jwtProviders": [{"name": "main", "default": true, "issuer": "https://issuer.test", "audiences": ["api"], "remoteJWKS": {"uri": "` + jwks.URL + `"}}]},
		"routes": [{"services": [{"name": "api", "port": 80}]},
			{"conditions": [{"prefix": "/health"}], "services": [{"name": "api", "port": 80}], "jwtVerificationPolicy": {"disabled": true}}]}`
	if err := createHTTPProxyJSON(ctx, cc, ns, "api", spec); err != nil {
		t.Fatal(err)
	}
	ctl := startController(t, cfg, "jwt", []string{ns})
	token := jwks.Token(testutil.Claims("https://issuer.test", "api"))
	get := func(path, token string) int {
		addr := ctl.srv.Proxy().ListenerAddr(translate.ListenerHTTPS)
		if addr == "" {
			return 0
		}
		tr := &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: "api.jwt.test", InsecureSkipVerify: true}, // self-signed test certificate
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodGet, "https://api.jwt.test"+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	eventually(t, 30*time.Second, "a request with a valid token to be served", func() bool { return get("/", token) == 200 })
	if code := get("/", ""); code != 401 {
		t.Errorf("without a token: %d, want 401", code)
	}
	if code := get("/", jwks.Token(testutil.Claims("https://issuer.test", "other"))); code != 403 {
		t.Errorf("a token for another audience: %d, want 403", code)
	}
	if code := get("/health", ""); code != 200 {
		t.Errorf("a route with verification disabled: %d, want 200", code)
	}
	// The status is written apart from the configuration, possibly after the traffic
	// is served.
	eventually(t, 30*time.Second, "the HTTPProxy's status to be valid", func() bool {
		p, err := cc.HTTPProxies(ns).Get(ctx, "api", metav1.GetOptions{})
		return err == nil && p.Status.CurrentStatus == "valid"
	})
}
