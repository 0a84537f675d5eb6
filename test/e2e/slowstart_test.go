package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// The slow start window of these tests, and an aggression that keeps a ramping
// endpoint at its minimum weight (10%) for most of it: (t/window)^20 stays below
// 0.1 until t is 89% of the window, 26 s here, so the share counted does not depend
// on how fast the requests go. As in Envoy, the endpoints of a cluster's first
// configuration ramp up too, so each test first waits the window out for them.
const (
	slowStartWindow     = 30 * time.Second
	slowStartAggression = "0.05"
)

// awaitFirstWindow waits until endpoints that were there when the cluster first
// appeared are past their slow start window: a fixed wait on purpose, for the
// window is a duration of the configuration, not a condition the test can see.
func awaitFirstWindow() { time.Sleep(slowStartWindow + time.Second) }

// share is the part of n requests to path that the backend named service answers.
func (e *env) share(host, path, service string, n int) float64 {
	got := 0
	for range n {
		if e.get(host, path).service() == service {
			got++
		}
	}
	return float64(got) / float64(n)
}

// TestHTTPProxySlowStart: with slowStartPolicy, an endpoint that joins a Service gets
// a small share of the requests at first (its minimum weight, 10%, as its window has
// barely begun), while one added without the policy gets its full share.
func TestHTTPProxySlowStart(t *testing.T) {
	t.Parallel()
	a, b := startEcho(t, "ss", "a"), startEcho(t, "ss", "b")
	proxy := fmt.Sprintf(`
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ss, namespace: ss}
spec:
  virtualhost: {fqdn: ss.example.com}
  routes:
  - conditions: [{prefix: /slow}]
    services: [{name: app, port: 80, slowStartPolicy: {window: %s, aggression: "%s"}}]
  - conditions: [{prefix: /full}]
    services: [{name: app, port: 80}]
`, slowStartWindow, slowStartAggression)
	e := start(t, map[string]string{"backends.yaml": serviceManifest("ss", "app", a), "proxy.yaml": proxy})
	e.waitFor("ss.example.com", "/slow", "a", http.StatusOK)
	e.waitFor("ss.example.com", "/full", "a", http.StatusOK)
	awaitFirstWindow()
	e.write("backends.yaml", serviceManifest("ss", "app", a, b))
	e.eventually(20*time.Second, "b to get requests on /full", func() bool { return e.share("ss.example.com", "/full", "b", 400) > 0.3 })
	if s := e.share("ss.example.com", "/slow", "b", 400); s == 0 || s > 0.25 {
		t.Errorf("the new endpoint got %.0f%% of /slow's requests, want about 9%% (its minimum weight)", 100*s)
	}
}

// TestHTTPProxySlowStartRecovery: an endpoint that fails its active health check and
// passes it again starts its slow start window again (as Envoy's does from its last
// health check pass): back in the cluster, it gets a small share of the requests on a
// route with slowStartPolicy, and its full share on one without.
func TestHTTPProxySlowStartRecovery(t *testing.T) {
	t.Parallel()
	a, b := startHealthEndpoint(t, "127.0.0.1", "a"), startHealthEndpoint(t, "127.0.0.2", "b")
	a.healthy.Store(true)
	b.healthy.Store(true)
	hc := `healthCheckPolicy: {path: /healthz, intervalSeconds: 1, timeoutSeconds: 2, unhealthyThresholdCount: 1, healthyThresholdCount: 1}`
	e := start(t, map[string]string{
		"backends.yaml": healthBackends(a, b),
		"proxy.yaml": fmt.Sprintf(`
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: hp, namespace: hp}
spec:
  virtualhost: {fqdn: ssr.example.com}
  routes:
  - conditions: [{prefix: /slow}]
    services: [{name: app, port: 80, healthPort: 8081, slowStartPolicy: {window: %s, aggression: "%s"}}]
    %s
  - conditions: [{prefix: /full}]
    services: [{name: app, port: 80, healthPort: 8081}]
    %s
`, slowStartWindow, slowStartAggression, hc, hc),
	})
	for _, path := range []string{"/slow", "/full"} {
		e.eventually(20*time.Second, "both endpoints to answer on "+path, func() bool {
			s := e.share("ssr.example.com", path, "b", 40)
			return s > 0 && s < 1
		})
	}
	awaitFirstWindow()
	if s := e.share("ssr.example.com", "/slow", "b", 400); s < 0.3 {
		t.Fatalf("past its window, b got %.0f%% of /slow's requests, want about half", 100*s)
	}
	b.healthy.Store(false)
	e.eventually(20*time.Second, "a alone to answer on /slow and /full (b fails its check)", func() bool {
		return e.share("ssr.example.com", "/slow", "b", 20) == 0 && e.share("ssr.example.com", "/full", "b", 20) == 0
	})
	b.healthy.Store(true)
	e.eventually(20*time.Second, "b to get requests on /full", func() bool { return e.share("ssr.example.com", "/full", "b", 200) > 0.3 })
	e.eventually(20*time.Second, "b to get requests on /slow", func() bool { return e.share("ssr.example.com", "/slow", "b", 40) > 0 })
	if s := e.share("ssr.example.com", "/slow", "b", 400); s > 0.25 {
		t.Errorf("recovered, b got %.0f%% of /slow's requests, want about 9%% (its minimum weight)", 100*s)
	}
}
