package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// metricSample returns the value of the sample of name whose labels include every
// pair of labels, from Prometheus text exposition; ok is false when there is none.
func metricSample(exposition, name string, labels map[string]string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		rest, found := strings.CutPrefix(line, name+"{")
		if !found {
			continue
		}
		set, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		match := true
		for k, v := range labels {
			if !strings.Contains(","+set+",", fmt.Sprintf(",%s=%q,", k, v)) {
				match = false
				break
			}
		}
		if match {
			f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// waitSample polls /metrics until the sample has the wanted value: requests are
// counted once their response is complete, an instant after the client has it.
func (e *env) waitSample(name string, labels map[string]string, want float64) {
	e.t.Helper()
	var got float64
	var ok bool
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, ok = metricSample(e.adminMetrics(), name, labels)
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Errorf("%s%v = %v (present: %v), want %v", name, labels, got, ok, want)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const metricsManifests = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: site}
spec:
  rules:
  - host: site.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
      - {path: /api, pathType: Exact, backend: {service: {name: api, port: {name: http}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: retry
  annotations: {portico.dev/num-retries: "2", portico.dev/retry-on-status-codes: "503"}
spec:
  rules:
  - host: retry.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: flaky, port: {name: http}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: slow
  annotations: {portico.dev/request-timeout: 300ms}
spec:
  rules:
  - host: slow.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: slow, port: {name: http}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: pertry
  annotations: {portico.dev/num-retries: "1", portico.dev/retry-on-status-codes: "503", portico.dev/per-try-timeout: 200ms}
spec:
  rules:
  - host: pertry.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: pertry, port: {name: http}}}}]}
`

const downManifests = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: down}
spec:
  rules:
  - host: down.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: down, port: {name: http}}}}]}
`

// The embedded proxy's metrics, read from the admin endpoint as an operator's Prometheus
// would: requests by virtual host and route (named after the Ingress and its path),
// retries, timeouts and connect failures by cluster; the series of a cluster and host
// that leave the configuration disappear; access log lines name the same route.
func TestProxyMetricsAndAccessLog(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web", "api", "flaky", "slow", "pertry"),
		// Nothing listens on the down Service's endpoint.
		"down.yaml":    serviceManifest("default", "down", testutil.RefusedAddr(t)) + "---\n" + downManifests,
		"ingress.yaml": metricsManifests,
	})
	for range 3 {
		if r := e.get("site.example.com", "/page"); r.status != 200 || r.service() != "web" {
			t.Fatalf("site /page: %d from %q", r.status, r.service())
		}
	}
	if r := e.get("site.example.com", "/api"); r.status != 200 || r.service() != "api" {
		t.Fatalf("site /api: %d from %q", r.status, r.service())
	}
	if r := e.get("nowhere.example.com", "/"); r.status != 404 {
		t.Fatalf("unknown host: %d", r.status)
	}
	if r := e.get("retry.example.com", "/", "X-Echo-Status", "503"); r.status != 503 {
		t.Errorf("retry: %d, want the last attempt's 503", r.status)
	}
	// The backends below never answer within the timeouts: they wait until cancelled.
	if r := e.get("slow.example.com", "/", "X-Echo-Delay", "30s"); r.status != 504 {
		t.Errorf("route timeout: %d, want 504", r.status)
	}
	if r := e.get("pertry.example.com", "/", "X-Echo-Delay", "30s"); r.status != 504 {
		t.Errorf("per-try timeout: %d, want 504", r.status)
	}
	if r := e.get("down.example.com", "/"); r.status != 502 {
		t.Errorf("connect failure: %d, want 502", r.status)
	}

	req := func(vhost, route, class string) map[string]string {
		return map[string]string{"listener": "ingress_http", "vhost": vhost, "route": route, "code_class": class}
	}
	cluster := func(name string) map[string]string { return map[string]string{"cluster": name} }
	for _, s := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"portico_proxy_requests_total", req("site.example.com", "ingress/default/site:prefix:/", "2xx"), 3},
		{"portico_proxy_requests_total", req("site.example.com", "ingress/default/site:exact:/api", "2xx"), 1},
		{"portico_proxy_requests_total", req("(none)", "(none)", "4xx"), 1},
		{"portico_proxy_requests_total", req("retry.example.com", "ingress/default/retry:prefix:/", "5xx"), 1},
		{"portico_proxy_request_duration_seconds_count", map[string]string{"vhost": "site.example.com", "route": "ingress/default/site:prefix:/"}, 3},
		{"portico_proxy_response_size_bytes_count", map[string]string{"vhost": "site.example.com", "route": "ingress/default/site:exact:/api"}, 1},
		{"portico_proxy_upstream_requests_total", map[string]string{"cluster": "default/web/80", "code_class": "2xx"}, 3},
		{"portico_proxy_upstream_retries_total", cluster("default/flaky/80"), 2},
		{"portico_proxy_upstream_timeouts_total", cluster("default/slow/80"), 1},
		{"portico_proxy_upstream_per_try_timeouts_total", cluster("default/pertry/80"), 1},
		{"portico_proxy_upstream_timeouts_total", cluster("default/pertry/80"), 0},
		{"portico_proxy_upstream_connect_failures_total", cluster("default/down/80"), 1},
		{"portico_proxy_upstream_connect_failures_total", cluster("default/web/80"), 0},
	} {
		e.waitSample(s.name, s.labels, s.want)
	}
	// The latency buckets go up to 10 minutes.
	e.waitSample("portico_proxy_request_duration_seconds_bucket",
		map[string]string{"vhost": "site.example.com", "route": "ingress/default/site:prefix:/", "le": "600"}, 3)

	// Every access log line names its route; the unmatched request names none.
	// Lines are written off the request path, so wait for them.
	routes := map[string]string{}
	accessRoute := regexp.MustCompile(` authority=(\S+) .* route=(\S+)`)
	wantRoutes := map[string]string{
		"site.example.com":    "ingress/default/site:", // prefix:/ or exact:/api
		"retry.example.com":   "ingress/default/retry:prefix:/",
		"down.example.com":    "ingress/default/down:prefix:/",
		"nowhere.example.com": "(none)",
	}
	e.eventually(10*time.Second, "access log lines of every host", func() bool {
		clear(routes)
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if m := accessRoute.FindStringSubmatch(line); m != nil && strings.Contains(line, "msg=access") {
				routes[m[1]] = m[2]
			}
		}
		return len(routes) >= len(wantRoutes)
	})
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "msg=access") && !accessRoute.MatchString(line) {
			t.Errorf("access log line without route: %s", line)
		}
	}
	for host, want := range wantRoutes {
		if !strings.HasPrefix(routes[host], want) {
			t.Errorf("access log route for %s = %q, want %q", host, routes[host], want)
		}
	}

	// The down Ingress and Service go: their series go with them.
	e.remove("down.yaml")
	e.waitFor("down.example.com", "/", "", 404)
	metrics := e.adminMetrics()
	for _, gone := range []string{`cluster="default/down/80"`, `vhost="down.example.com"`} {
		if strings.Contains(metrics, gone) {
			t.Errorf("after removing the down Ingress and Service, /metrics still has series with %s", gone)
		}
	}
	// The others keep counting.
	e.get("site.example.com", "/page")
	e.waitSample("portico_proxy_requests_total", req("site.example.com", "ingress/default/site:prefix:/", "2xx"), 4)
}
