package kube

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestServeHTTPProxyLocalRateLimit: in `serve`, an HTTPProxy's local rate limit is valid
// and enforced by the embedded proxy: the request past requests + burst in the hour is
// answered with the policy's status and headers, while the host's other route is not
// limited.
func TestServeHTTPProxyLocalRateLimit(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 1)
	const ns = "hp-ratelimit"
	backend(t, pn, "web", 9111)
	createNamespace(t, c, ns)
	createService(t, c, ns, "web", pn.PodIP, 9111)
	if err := createHTTPProxyJSON(ctx, cc, ns, "limited", `{"virtualhost": {"fqdn": "rl.hp.test"}, "routes": [
		{"conditions": [{"prefix": "/limited"}], "services": [{"name": "web", "port": 80}],
		 "rateLimitPolicy": {"local": {"requests": 2, "burst": 1, "unit": "hour", "responseStatusCode": 503,
			"responseHeadersToAdd": [{"name": "x-rate-limited", "value": "yes"}]}}},
		{"services": [{"name": "web", "port": 80}]}]}`); err != nil {
		t.Fatal(err)
	}
	ctl := startController(t, cfg, "rl", []string{ns})

	eventually(t, 20*time.Second, "rl.hp.test/ to be served by web", func() bool {
		code, r := ctl.getWith("rl.hp.test", "/")
		return code == http.StatusOK && r.Service == "web"
	})
	for i := range 3 {
		if code, r := ctl.getWith("rl.hp.test", "/limited"); code != http.StatusOK || r.Service != "web" {
			t.Fatalf("request %d to /limited: %d from %q, want 200 from web", i+1, code, r.Service)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+ctl.srv.Proxy().ListenerAddr(translate.ListenerHTTP)+"/limited", nil)
	req.Host = "rl.hp.test"
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "local_rate_limited" || resp.Header.Get("X-Rate-Limited") != "yes" {
		t.Errorf("fourth request to /limited: %d %q, x-rate-limited %q; want 503 local_rate_limited, yes", resp.StatusCode, body, resp.Header.Get("X-Rate-Limited"))
	}
	for range 5 {
		if code, _ := ctl.getWith("rl.hp.test", "/"); code != http.StatusOK {
			t.Fatalf("/ (no policy): %d, want 200", code)
		}
	}
	eventually(t, 20*time.Second, "the HTTPProxy's status to be valid", func() bool {
		p, err := cc.HTTPProxies(ns).Get(ctx, "limited", metav1.GetOptions{})
		return err == nil && p.Status.CurrentStatus == "valid"
	})
}

// TestServeHTTPProxyGlobalRateLimit: in `serve` with --rate-limit-service, two routes
// sharing a global descriptor are limited together by the real rate limit service.
func TestServeHTTPProxyGlobalRateLimit(t *testing.T) {
	rls := testutil.StartRateLimit(t, testutil.StartRedis(t), `
domain: contour
descriptors:
- key: generic_key
  value: shared
  rate_limit: {unit: hour, requests_per_unit: 2}
`)
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	pn := kubetest.NewPodNetwork(t, 1)
	const ns = "hp-global-ratelimit"
	backend(t, pn, "web", 9112)
	createNamespace(t, c, ns)
	createService(t, c, ns, "web", pn.PodIP, 9112)
	shared := `"rateLimitPolicy": {"global": {"descriptors": [{"entries": [{"genericKey": {"value": "shared"}}]}]}}`
	if err := createHTTPProxyJSON(context.Background(), cc, ns, "global", `{"virtualhost": {"fqdn": "gl.hp.test"}, "routes": [
		{"conditions": [{"prefix": "/a"}], "services": [{"name": "web", "port": 80}], `+shared+`},
		{"conditions": [{"prefix": "/b"}], "services": [{"name": "web", "port": 80}], `+shared+`},
		{"services": [{"name": "web", "port": 80}]}]}`); err != nil {
		t.Fatal(err)
	}
	ctl := startControllerWith(t, cfg, "gl", []string{ns}, func(o *app.ServeOptions) {
		o.RateLimit = &translate.RateLimitService{Address: rls.GRPCAddr, Domain: "contour", Timeout: 30 * time.Second}
	})
	eventually(t, 20*time.Second, "gl.hp.test/ to be served by web", func() bool {
		code, r := ctl.getWith("gl.hp.test", "/")
		return code == http.StatusOK && r.Service == "web"
	})
	for _, path := range []string{"/a", "/b"} {
		if code, r := ctl.getWith("gl.hp.test", path); code != http.StatusOK || r.Service != "web" {
			t.Fatalf("%s: %d from %q, want 200 from web", path, code, r.Service)
		}
	}
	for _, path := range []string{"/a", "/b"} {
		if code, _ := ctl.getWith("gl.hp.test", path); code != http.StatusTooManyRequests {
			t.Errorf("%s past the shared limit: %d, want 429", path, code)
		}
	}
}
