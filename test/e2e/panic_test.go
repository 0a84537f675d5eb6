package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestHTTPProxyHealthCheckNoPanic: a route with a healthCheckPolicy never sends a request
// to an endpoint failing its check. One of two failing: every request reaches the other.
// Both failing: every request gets 503 "no healthy upstream" and neither backend sees
// it (Envoy's default panic mode would spread the requests over both). The first to
// pass its check again gets the traffic back.
//
// Without a healthCheckPolicy Envoy's default panic threshold (50%) stays: a route
// whose only endpoint is ejected by failurePolicy's passive health check still sends
// it every request, and clients get that endpoint's answers rather than a 503.
func TestHTTPProxyHealthCheckNoPanic(t *testing.T) {
	t.Parallel()
	a := startScripted(t, "pm", "a", nil)
	b := startScripted(t, "pm", "b", nil)
	solo := startScripted(t, "pm", "solo", func(int64) (int, time.Duration) { return 500, 0 })
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("pm", "app", a.addr, b.addr) + "---\n" + serviceManifest("pm", "solo", solo.addr),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: panic, namespace: pm}
spec:
  virtualhost: {fqdn: panic.example.com}
  routes:
  - conditions: [{prefix: /checked}]
    services: [{name: app, port: 80}]
    healthCheckPolicy: {path: /healthz, intervalSeconds: 1, timeoutSeconds: 2, unhealthyThresholdCount: 1, healthyThresholdCount: 1}
  - conditions: [{prefix: /passive}]
    services: [{name: solo, port: 80}]
    failurePolicy: {retryPolicyEnabled: false, consecutive5xx: 2, interval: 100ms, baseEjectionTime: 10m}
`,
	})
	get := func() result { return e.get("panic.example.com", "/checked") }
	answeredOnlyBy := func(want string) func() bool {
		return func() bool {
			for range 6 {
				if answeredBy(get()) != want {
					return false
				}
			}
			return true
		}
	}
	// noneReach sends n requests and fails unless each is answered by want (""
	// for the proxy's 503) and the backends' request counts stay as they were.
	noneReach := func(n int, want string, backends ...*scripted) {
		t.Helper()
		before := make([]int64, len(backends))
		for i, s := range backends {
			before[i] = s.hits.Load()
		}
		for range n {
			r := get()
			switch {
			case want == "" && (r.status != 503 || !strings.Contains(r.body, "no healthy upstream")):
				t.Fatalf("GET /checked with every endpoint failing its check: %d %q from %q, want 503 \"no healthy upstream\"", r.status, r.body, answeredBy(r))
			case want != "" && (r.status != 200 || answeredBy(r) != want):
				t.Fatalf("GET /checked: %d from %q, want 200 from %s", r.status, answeredBy(r), want)
			}
		}
		for i, s := range backends {
			if got := s.hits.Load(); got != before[i] {
				t.Errorf("%s, failing its health check, got %d of %d requests", s.name, got-before[i], n)
			}
		}
	}

	b.fail(503)
	e.eventually(30*time.Second, "every request answered by a (b fails its check)", answeredOnlyBy("pm/a"))
	noneReach(20, "pm/a", b)

	a.fail(503)
	e.eventually(30*time.Second, "503 \"no healthy upstream\" once a fails its check too", func() bool {
		r := get()
		return r.status == 503 && answeredBy(r) == ""
	})
	noneReach(20, "", a, b)

	b.health.Store(200)
	e.eventually(30*time.Second, "every request answered by b once it passes its check again", answeredOnlyBy("pm/b"))
	noneReach(20, "pm/b", a)

	// No healthCheckPolicy: the ejected endpoint is all there is (0% healthy, below
	// Envoy's 50%), so it keeps getting the requests.
	for range 2 {
		e.get("panic.example.com", "/passive")
	}
	e.eventually(10*time.Second, "solo to be ejected after 2 failures in a row", func() bool {
		ejected, _ := outlierMetrics(e, "pm/solo/http")
		if ejected != 1 {
			e.get("panic.example.com", "/passive")
		}
		return ejected == 1
	})
	hits := solo.hits.Load()
	for range 10 {
		if r := e.get("panic.example.com", "/passive"); r.status != 500 || answeredBy(r) != "pm/solo" {
			t.Fatalf("GET /passive with its only endpoint ejected: %d from %q, want solo's 500 (panic mode)", r.status, answeredBy(r))
		}
	}
	if ejected, _ := outlierMetrics(e, "pm/solo/http"); ejected != 1 {
		t.Fatalf("solo's ejection ended within its 10m baseEjectionTime (%v ejected)", ejected)
	}
	if got := solo.hits.Load() - hits; got != 10 {
		t.Errorf("solo, ejected, got %d of 10 requests, want all (panic mode)", got)
	}
}
