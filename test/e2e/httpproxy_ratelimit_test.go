package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// Local rate limits through the embedded proxy: per route and per virtual host, the
// answer to the request over the limit, and buckets that keep counting across
// configuration swaps. Every limit is per hour, so no refill can happen during a test.

// rateLimitProxy is rl.example.com: /limited has a bucket of its own (2 per hour, burst
// 1), the other routes share the host's (3 per hour). extra is more routes.
func rateLimitProxy(limitedRequests int, extra string) string {
	return fmt.Sprintf(`apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: rl, namespace: default}
spec:
  virtualhost:
    fqdn: rl.example.com
    rateLimitPolicy:
      local: {requests: 3, unit: hour}
  routes:
  - conditions: [{prefix: /limited}]
    services: [{name: app, port: 80}]
    rateLimitPolicy:
      local:
        requests: %d
        burst: 1
        unit: hour
        responseStatusCode: 503
        responseHeadersToAdd:
        - {name: x-rate-limited, value: "yes"}
  - conditions: [{prefix: /a}]
    services: [{name: app, port: 80}]
  - conditions: [{prefix: /b}]
    services: [{name: app, port: 80}]
%s`, limitedRequests, extra)
}

// wantServed sends n requests to path and wants each answered by the app.
func (e *env) wantServed(host, path string, n int) {
	e.t.Helper()
	for i := range n {
		if r := e.get(host, path); r.status != http.StatusOK || r.service() != "app" {
			e.t.Fatalf("request %d to %s%s: %d from %q (%q), want 200 from app", i+1, host, path, r.status, r.service(), r.body)
		}
	}
}

// wantLimited wants the next request to path answered status by the proxy's limit.
func (e *env) wantLimited(host, path string, status int, header ...string) {
	e.t.Helper()
	r := e.get(host, path)
	if r.status != status || r.service() != "" || r.body != "local_rate_limited" {
		e.t.Fatalf("%s%s over the limit: %d from %q (%q), want %d local_rate_limited from the proxy", host, path, r.status, r.service(), r.body, status)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if got := r.header.Get(header[i]); got != header[i+1] {
			e.t.Errorf("%s%s over the limit: header %s = %q, want %q", host, path, header[i], got, header[i+1])
		}
	}
}

func TestHTTPProxyLocalRateLimit(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "app"),
		"proxy.yaml":    rateLimitProxy(2, ""),
	})
	e.waitFor("rl.example.com", "/", "", http.StatusNotFound)

	// The route's own bucket: requests + burst, then the configured answer.
	e.wantServed("rl.example.com", "/limited", 3)
	e.wantLimited("rl.example.com", "/limited", http.StatusServiceUnavailable, "X-Rate-Limited", "yes")

	// The host's bucket is one for all the routes without their own.
	e.wantServed("rl.example.com", "/a", 2)
	e.wantServed("rl.example.com", "/b", 1)
	e.wantLimited("rl.example.com", "/a", http.StatusTooManyRequests, "X-Rate-Limited", "")
	e.wantLimited("rl.example.com", "/b", http.StatusTooManyRequests)

	// An edit elsewhere (another object, another route of this one) swaps the
	// configuration; the buckets keep counting.
	e.write("other.yaml", `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: other, namespace: default}
spec:
  virtualhost: {fqdn: other.example.com}
  routes: [{services: [{name: app, port: 80}]}]
`)
	e.waitFor("other.example.com", "/", "app", http.StatusOK)
	e.wantLimited("rl.example.com", "/limited", http.StatusServiceUnavailable)
	e.wantLimited("rl.example.com", "/a", http.StatusTooManyRequests)
	e.write("proxy.yaml", rateLimitProxy(2, `  - conditions: [{prefix: /new}]
    services: [{name: app, port: 80}]
`))
	e.waitFor("rl.example.com", "/new", "", http.StatusTooManyRequests) // the host's bucket, empty
	e.wantLimited("rl.example.com", "/limited", http.StatusServiceUnavailable)

	// A new policy is a new bucket.
	e.write("proxy.yaml", rateLimitProxy(5, ""))
	e.waitFor("rl.example.com", "/limited", "app", http.StatusOK)
	e.wantServed("rl.example.com", "/limited", 5)
	e.wantLimited("rl.example.com", "/limited", http.StatusServiceUnavailable)
	e.wantLimited("rl.example.com", "/a", http.StatusTooManyRequests)

	// Every limited answer is counted, by filter and status.
	resp, err := http.Get("http://" + e.runner.Admin().Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`portico_proxy_http_filter_replies_total{code="503",filter="envoy.filters.http.local_ratelimit"}`,
		`portico_proxy_http_filter_replies_total{code="429",filter="envoy.filters.http.local_ratelimit"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
}

// TestCheckLocalRateLimitInvalid: `portico check` shows what is wrong with a local rate
// limit, field by field, and fails.
func TestCheckLocalRateLimitInvalid(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "proxy.yaml", serviceManifest("default", "app", "127.0.0.1:9")+`---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: rl, namespace: default}
spec:
  virtualhost:
    fqdn: rl.example.com
    rateLimitPolicy:
      local: {requests: 1, unit: hour, responseStatusCode: 418}
  routes:
  - services: [{name: app, port: 80}]
    rateLimitPolicy:
      local: {requests: 0, unit: day}
`)
	out, errOut, code := runCheck(t, dir)
	for _, want := range []string{
		"spec.virtualhost.rateLimitPolicy.local.responseStatusCode 418 is not a 4xx or 5xx status the data planes can answer",
		`spec.routes[0].rateLimitPolicy.local.unit "day" must be second, minute or hour`,
		"spec.routes[0].rateLimitPolicy.local.requests must be at least 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("portico check does not say %q\nstdout:\n%s\nstderr:\n%s", want, out, errOut)
		}
	}
	if code != 1 {
		t.Errorf("portico check exited %d, want 1", code)
	}
}

// TestDocumentedLocalRateLimitExample runs the example of docs/httpproxy.md's
// rateLimitPolicy section as written.
func TestDocumentedLocalRateLimitExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/httpproxy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n### rateLimitPolicy\n")
	_, example, ok2 := strings.Cut(section, "```yaml\n")
	example, _, ok3 := strings.Cut(example, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/httpproxy.md has no YAML example in its rateLimitPolicy section")
	}
	e := start(t, map[string]string{"web.yaml": backends(t, "web"), "shop.yaml": example})
	e.waitFor("shop.localhost", "/", "web", http.StatusOK)
	for i := range 5 {
		if r := e.get("shop.localhost", "/login"); r.status != http.StatusOK || r.service() != "web" {
			t.Fatalf("login %d: %d from %q, want 200 from web", i+1, r.status, r.service())
		}
	}
	r := e.get("shop.localhost", "/login")
	if r.status != http.StatusServiceUnavailable || r.body != "local_rate_limited" || r.header.Get("X-Rate-Limited") != "login attempts" {
		t.Errorf("sixth login: %d %q, x-rate-limited %q; the docs say 503 local_rate_limited with x-rate-limited: login attempts", r.status, r.body, r.header.Get("X-Rate-Limited"))
	}
}
