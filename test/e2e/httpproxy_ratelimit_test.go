package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
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

// Global rate limits through the embedded proxy, decided by the real envoyproxy/ratelimit
// service on a real Redis, both started by the test.

const globalServiceConfig = `
domain: contour
descriptors:
- key: generic_key
  value: shared
  rate_limit: {unit: hour, requests_per_unit: 3}
- key: user
  value: alice
  rate_limit: {unit: hour, requests_per_unit: 1}
`

const globalProxy = `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: gl, namespace: default}
spec:
  virtualhost: {fqdn: gl.example.com}
  routes:
  - conditions: [{prefix: /a}]
    services: [{name: app, port: 80}]
    rateLimitPolicy:
      global:
        descriptors: [{entries: [{genericKey: {value: shared}}]}]
  - conditions: [{prefix: /b}]
    services: [{name: app, port: 80}]
    rateLimitPolicy:
      global:
        descriptors: [{entries: [{genericKey: {value: shared}}]}]
  - conditions: [{prefix: /user}]
    services: [{name: app, port: 80}]
    rateLimitPolicy:
      global:
        descriptors: [{entries: [{requestHeader: {headerName: x-user, descriptorKey: user}}]}]
  - services: [{name: app, port: 80}]
`

func startGlobal(t *testing.T, rls string, failOpen bool) *env {
	t.Helper()
	e := startWith(t, map[string]string{"backends.yaml": backends(t, "app"), "proxy.yaml": globalProxy}, app.RunOptions{
		// A generous deadline, never a measure of speed.
		RateLimit: &translate.RateLimitService{Address: rls, Domain: "contour", FailOpen: failOpen, Timeout: 30 * time.Second},
	})
	e.waitFor("gl.example.com", "/", "app", http.StatusOK)
	return e
}

func TestHTTPProxyGlobalRateLimit(t *testing.T) {
	rls := testutil.StartRateLimit(t, testutil.StartRedis(t), globalServiceConfig)
	e := startGlobal(t, rls.GRPCAddr, false)

	// Two routes share one descriptor, so one count: 3 in the hour across both.
	e.wantServed("gl.example.com", "/a", 2)
	e.wantServed("gl.example.com", "/b", 1)
	for _, path := range []string{"/a", "/b"} {
		r := e.get("gl.example.com", path)
		if r.status != http.StatusTooManyRequests || r.service() != "" || r.header.Get("X-Envoy-Ratelimited") != "true" {
			t.Errorf("%s over the shared limit: %d from %q, x-envoy-ratelimited %q; want 429 from the proxy, true", path, r.status, r.service(), r.header.Get("X-Envoy-Ratelimited"))
		}
	}
	// A request header's value is the descriptor: alice has 1 in the hour, bob none set.
	if r := e.get("gl.example.com", "/user", "X-User", "alice"); r.status != http.StatusOK {
		t.Errorf("alice's first request: %d, want 200", r.status)
	}
	if r := e.get("gl.example.com", "/user", "X-User", "alice"); r.status != http.StatusTooManyRequests {
		t.Errorf("alice's second request: %d, want 429", r.status)
	}
	for range 3 {
		if r := e.get("gl.example.com", "/user", "X-User", "bob"); r.status != http.StatusOK {
			t.Fatalf("bob (no limit configured for him): %d, want 200", r.status)
		}
	}
	// A route without a policy is never sent to the service.
	e.wantServed("gl.example.com", "/free", 5)

	// An edit of the policy alone takes effect: / now shares the spent descriptor.
	e.write("proxy.yaml", strings.Replace(globalProxy, `  - services: [{name: app, port: 80}]
`, `  - services: [{name: app, port: 80}]
    rateLimitPolicy:
      global:
        descriptors: [{entries: [{genericKey: {value: shared}}]}]
`, 1))
	e.waitFor("gl.example.com", "/free", "", http.StatusTooManyRequests)
}

// TestHTTPProxyGlobalRateLimitServiceDown: with the service gone, failOpen lets requests
// through; without it they are answered 500.
func TestHTTPProxyGlobalRateLimitServiceDown(t *testing.T) {
	redis := testutil.StartRedis(t)
	for _, failOpen := range []bool{true, false} {
		t.Run(fmt.Sprintf("failOpen %v", failOpen), func(t *testing.T) {
			rls := testutil.StartRateLimit(t, redis, strings.ReplaceAll(globalServiceConfig, "shared", fmt.Sprintf("down-%v", failOpen)))
			e := startGlobal(t, rls.GRPCAddr, failOpen)
			e.wantServed("gl.example.com", "/a", 1)
			rls.Stop()
			want := http.StatusInternalServerError
			if failOpen {
				want = http.StatusOK
			}
			for range 3 {
				if r := e.get("gl.example.com", "/a"); r.status != want {
					t.Fatalf("/a with the service down: %d (%q), want %d", r.status, r.body, want)
				}
			}
		})
	}
}

// TestDocumentedGlobalRateLimitExample runs docs/httpproxy.md's global rate limit
// example: its service configuration and its HTTPProxy, as written.
func TestDocumentedGlobalRateLimitExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/httpproxy.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "\n#### Global rate limits\n")
	var blocks []string
	for rest := section; ; {
		var block string
		var ok bool
		if _, rest, ok = strings.Cut(rest, "```yaml\n"); !ok {
			break
		}
		block, rest, _ = strings.Cut(rest, "```")
		blocks = append(blocks, block)
	}
	if len(blocks) < 2 {
		t.Fatalf("docs/httpproxy.md's global rate limit section has %d YAML examples, want the service's configuration and the HTTPProxy", len(blocks))
	}
	rls := testutil.StartRateLimit(t, testutil.StartRedis(t), blocks[0])
	e := startWith(t, map[string]string{"web.yaml": backends(t, "web"), "api.yaml": blocks[1]}, app.RunOptions{
		RateLimit: &translate.RateLimitService{Address: rls.GRPCAddr, Domain: "contour", Timeout: 30 * time.Second},
	})
	e.waitFor("api.localhost", "/", "web", http.StatusOK)
	for i, path := range []string{"/reports", "/exports", "/reports"} {
		if r := e.get("api.localhost", path); r.status != http.StatusOK {
			t.Fatalf("request %d (%s): %d, want 200", i+1, path, r.status)
		}
	}
	if r := e.get("api.localhost", "/exports"); r.status != http.StatusTooManyRequests {
		t.Errorf("fourth request to /reports or /exports: %d; the docs say 429", r.status)
	}
}

// TestHTTPProxyDefaultGlobalRateLimit: the controller's default global policy limits the
// hosts without a global policy of their own; global.disabled opts a host out.
func TestHTTPProxyDefaultGlobalRateLimit(t *testing.T) {
	rls := testutil.StartRateLimit(t, testutil.StartRedis(t), `
domain: contour
descriptors:
- key: generic_key
  value: default
  rate_limit: {unit: hour, requests_per_unit: 2}
`)
	def, err := dag.ParseDefaultGlobalRateLimit(&contourv1.GlobalRateLimitPolicy{Descriptors: []contourv1.RateLimitDescriptor{{
		Entries: []contourv1.RateLimitDescriptorEntry{{GenericKey: &contourv1.GenericKeyDescriptor{Value: "default"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	host := func(name, policy string) string {
		return fmt.Sprintf(`apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: %[1]s, namespace: default}
spec:
  virtualhost: {fqdn: %[1]s.example.com%[2]s}
  routes: [{services: [{name: app, port: 80}]}]
`, name, policy)
	}
	e := startWith(t, map[string]string{
		"backends.yaml": backends(t, "app"),
		"plain.yaml":    host("plain", ""),
		"optout.yaml":   host("optout", ", rateLimitPolicy: {global: {disabled: true}}"),
	}, app.RunOptions{
		RateLimit:              &translate.RateLimitService{Address: rls.GRPCAddr, Domain: "contour", Timeout: 30 * time.Second},
		DefaultGlobalRateLimit: def,
	})
	e.waitFor("optout.example.com", "/", "app", http.StatusOK)
	e.wantServed("plain.example.com", "/", 2)
	if r := e.get("plain.example.com", "/"); r.status != http.StatusTooManyRequests {
		t.Errorf("third request to a host under the default policy: %d, want 429", r.status)
	}
	e.wantServed("optout.example.com", "/", 5)
}
