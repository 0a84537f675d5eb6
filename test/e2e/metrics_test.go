package e2e

import (
	"fmt"
	"regexp"
	"slices"
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
// would: requests by virtual host, route (the Ingress) and path, retries, timeouts and
// connect failures by Service port; only what happened has series; the series of a
// Service and host that leave the configuration disappear; access log lines name the
// same route, path and Service port.
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

	req := func(vhost, route, path, class string) map[string]string {
		return map[string]string{"listener": "ingress_http", "vhost": vhost, "route": route, "path": path, "code_class": class}
	}
	svc := func(name string) map[string]string {
		return map[string]string{"service_namespace": "default", "service_name": name, "service_port": "http"}
	}
	withClass := func(m map[string]string, class string) map[string]string {
		m["code_class"] = class
		return m
	}
	for _, s := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"portico_proxy_requests_total", req("site.example.com", "ingress/default/site", "/", "2xx"), 3},
		{"portico_proxy_requests_total", req("site.example.com", "ingress/default/site", "/api", "2xx"), 1},
		{"portico_proxy_requests_total", req("(none)", "(none)", "(none)", "4xx"), 1},
		{"portico_proxy_requests_total", req("retry.example.com", "ingress/default/retry", "/", "5xx"), 1},
		{"portico_proxy_request_duration_seconds_count", map[string]string{"vhost": "site.example.com", "route": "ingress/default/site", "path": "/"}, 3},
		{"portico_proxy_response_size_bytes_count", map[string]string{"vhost": "site.example.com", "route": "ingress/default/site", "path": "/api"}, 1},
		{"portico_proxy_upstream_requests_total", withClass(svc("web"), "2xx"), 3},
		{"portico_proxy_upstream_retries_total", svc("flaky"), 2},
		{"portico_proxy_upstream_timeouts_total", svc("slow"), 1},
		{"portico_proxy_upstream_per_try_timeouts_total", svc("pertry"), 1},
		{"portico_proxy_upstream_connect_failures_total", svc("down"), 1},
	} {
		e.waitSample(s.name, s.labels, s.want)
	}
	// What did not happen has no series.
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"portico_proxy_upstream_timeouts_total", svc("pertry")},
		{"portico_proxy_upstream_connect_failures_total", svc("web")},
		{"portico_proxy_requests_total", req("site.example.com", "ingress/default/site", "/", "5xx")},
	} {
		if v, ok := metricSample(e.adminMetrics(), s.name, s.labels); ok {
			t.Errorf("%s%v = %v, want no series", s.name, s.labels, v)
		}
	}
	// The latency buckets go up to 10 minutes.
	e.waitSample("portico_proxy_request_duration_seconds_bucket",
		map[string]string{"vhost": "site.example.com", "route": "ingress/default/site", "path": "/", "le": "600"}, 3)

	// Every access log line names its route, path and Service port as the series do; the
	// unmatched request names none. Lines are written off the request path, so wait for them.
	type named struct{ route, path, service string }
	lines := map[string]named{}
	accessRoute := regexp.MustCompile(` authority=(\S+) .* upstream_service=(\S*) .* route=(\S+) route_path=(\S+)`)
	wantLines := map[string]named{
		"site.example.com":    {"ingress/default/site", "/", "default/web/http"}, // or /api, api
		"retry.example.com":   {"ingress/default/retry", "/", "default/flaky/http"},
		"down.example.com":    {"ingress/default/down", "/", "default/down/http"},
		"nowhere.example.com": {"(none)", "(none)", ""},
	}
	e.eventually(10*time.Second, "access log lines of every host", func() bool {
		clear(lines)
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if m := accessRoute.FindStringSubmatch(line); m != nil && strings.Contains(line, "msg=access") {
				lines[m[1]] = named{m[3], m[4], strings.Trim(m[2], `"`)}
			}
		}
		return len(lines) >= len(wantLines)
	})
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(line, "msg=access") && !accessRoute.MatchString(line) {
			t.Errorf("access log line without route: %s", line)
		}
	}
	for host, want := range wantLines {
		got := lines[host]
		if host == "site.example.com" && got.path == "/api" {
			want = named{"ingress/default/site", "/api", "default/api/http"}
		}
		if got != want {
			t.Errorf("access log line for %s names %+v, want %+v", host, got, want)
		}
	}

	// A line has the keys, in order, of the sample in docs/metrics.md.
	checkDocumentedKeys(t, "proto=HTTP/1.1", e.accessLine("authority=site.example.com", "status=200"))

	// The down Ingress and Service go: their series go with them.
	e.remove("down.yaml")
	e.waitFor("down.example.com", "/", "", 404)
	metrics := e.adminMetrics()
	for _, gone := range []string{`service_name="down"`, `vhost="down.example.com"`} {
		if strings.Contains(metrics, gone) {
			t.Errorf("after removing the down Ingress and Service, /metrics still has series with %s", gone)
		}
	}
	// The others keep counting.
	e.get("site.example.com", "/page")
	e.waitSample("portico_proxy_requests_total", req("site.example.com", "ingress/default/site", "/", "2xx"), 4)
}

// Series appear with the first request they count: /metrics before any request has no
// request series of any route, Service or status class; after one request it has the
// series of that request's route, Service port and class, and no others.
func TestMetricsSeriesAppearWithTheFirstRequest(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web", "api", "flaky", "slow", "pertry"),
		"ingress.yaml":  metricsManifests,
	})
	perRequest := regexp.MustCompile(`^(portico_proxy_(?:requests_total|request_duration_seconds_count|response_size_bytes_count|upstream_[a-z_]+_total))\{(.*)\} `)
	series := func() []string {
		var out []string
		for _, line := range strings.Split(e.adminMetrics(), "\n") {
			if m := perRequest.FindStringSubmatch(line); m != nil {
				out = append(out, m[1]+"{"+m[2]+"}")
			}
		}
		slices.Sort(out)
		return out
	}
	// Ready (start waited for /readyz), every route and cluster configured, nothing served.
	if before := series(); len(before) != 0 {
		t.Errorf("before any request, per-request series:\n%s", strings.Join(before, "\n"))
	}
	if r := e.get("site.example.com", "/page"); r.status != 200 || r.service() != "web" {
		t.Fatalf("site /page: %d from %q", r.status, r.service())
	}
	e.eventually(5*time.Second, "the request to be counted", func() bool { return len(series()) >= 4 })
	first := series()
	want := []string{
		`portico_proxy_request_duration_seconds_count{listener="ingress_http",path="/",route="ingress/default/site",vhost="site.example.com"}`,
		`portico_proxy_requests_total{code_class="2xx",listener="ingress_http",path="/",route="ingress/default/site",vhost="site.example.com"}`,
		`portico_proxy_response_size_bytes_count{listener="ingress_http",path="/",route="ingress/default/site",vhost="site.example.com"}`,
		`portico_proxy_upstream_requests_total{code_class="2xx",service_name="web",service_namespace="default",service_port="http"}`,
	}
	if !slices.Equal(first, want) {
		t.Errorf("after the first request, per-request series:\n%s\nwant:\n%s", strings.Join(first, "\n"), strings.Join(want, "\n"))
	}
	if r := e.get("retry.example.com", "/", "X-Echo-Status", "503"); r.status != 503 {
		t.Fatalf("retry: %d", r.status)
	}
	e.waitSample("portico_proxy_upstream_retries_total", map[string]string{"service_name": "flaky"}, 2)
	added := slices.DeleteFunc(series(), func(s string) bool { return slices.Contains(first, s) })
	want = []string{
		`portico_proxy_request_duration_seconds_count{listener="ingress_http",path="/",route="ingress/default/retry",vhost="retry.example.com"}`,
		`portico_proxy_requests_total{code_class="5xx",listener="ingress_http",path="/",route="ingress/default/retry",vhost="retry.example.com"}`,
		`portico_proxy_response_size_bytes_count{listener="ingress_http",path="/",route="ingress/default/retry",vhost="retry.example.com"}`,
		`portico_proxy_upstream_requests_total{code_class="5xx",service_name="flaky",service_namespace="default",service_port="http"}`,
		`portico_proxy_upstream_retries_total{service_name="flaky",service_namespace="default",service_port="http"}`,
	}
	if !slices.Equal(added, want) {
		t.Errorf("a retried 503 added:\n%s\nwant:\n%s", strings.Join(added, "\n"), strings.Join(want, "\n"))
	}
}
