package dag

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/testutil"
)

// policyRoot is a root on p.example.com in namespace team whose routes are written as
// YAML flow mappings.
func policyRoot(t testing.TB, routes ...string) runtime.Object {
	return proxy(t, `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: p.example.com}, routes: [`+strings.Join(routes, ", ")+`]}}`)
}

// onlyRoute builds the objects and returns the single route of p.example.com, checking
// that the root is valid.
func onlyRoute(t *testing.T, objs ...runtime.Object) (*Route, Status) {
	t.Helper()
	g := build(append(objs, svc("team", "web", ":80"), svc("team", "api", ":80"))...)
	st := wantProxy(t, g, "team", "root", StatusValid)
	routes := routesOfHost(t, g, "p.example.com")
	if len(routes) != 1 {
		t.Fatalf("routes = %v, want one", viewProxyRoutes(routes))
	}
	return routes[0], st
}

// invalidRoute builds the objects and checks that the root is invalid for the reason.
func invalidRoute(t *testing.T, typ, reason string, parts []string, objs ...runtime.Object) {
	t.Helper()
	g := build(append(objs, svc("team", "web", ":80"))...)
	wantInvalid(t, g, "team", "root", typ, reason, parts...)
	if http, _ := hostNames(g); len(http) != 0 {
		t.Errorf("an invalid root is served: %v", http)
	}
}

func TestHTTPProxyTimeoutPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy   string
		want     *TimeoutPolicy
		idleConn *time.Duration
	}{
		{`{response: 1s}`, &TimeoutPolicy{Request: dur(time.Second)}, nil},
		{`{response: infinity, idle: 1m30s}`, &TimeoutPolicy{Request: dur(0), Idle: dur(90 * time.Second)}, nil},
		{`{idle: infinite}`, &TimeoutPolicy{Idle: dur(0)}, nil},
		{`{idleConnection: 30s}`, nil, dur(30 * time.Second)},
		{`{idleConnection: infinity}`, nil, dur(0)},
		{`{}`, nil, nil},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r, _ := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], timeoutPolicy: `+tc.policy+`}`))
			if diff := cmp.Diff(tc.want, r.Timeouts); diff != "" {
				t.Errorf("timeouts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.idleConn, r.Clusters[0].Cluster.IdleConnectionTimeout); diff != "" {
				t.Errorf("idle connection timeout (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct{ policy, field string }{
		{`{response: soon}`, "spec.routes[0].timeoutPolicy.response"},
		{`{idle: "-1s"}`, "spec.routes[0].timeoutPolicy.idle"},
		{`{idleConnection: 10}`, "spec.routes[0].timeoutPolicy.idleConnection"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			invalidRoute(t, problemRoute, "DurationInvalid", []string{tc.field, "is not a duration"}, policyRoot(t, `{services: [{name: web, port: 80}], timeoutPolicy: `+tc.policy+`}`))
		})
	}
}

// retryPolicy with HTTPProxy's defaults: count 0 is one retry, -1 none; retryOn 5xx.
func TestHTTPProxyRetryPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   *RetryPolicy
	}{
		{`{count: 0}`, &RetryPolicy{NumRetries: 1, RetryOn: []string{"5xx"}}},
		{`{count: -1}`, nil},
		{`{count: 3, perTryTimeout: 150ms, retryOn: [gateway-error, reset]}`, &RetryPolicy{NumRetries: 3, PerTryTimeout: 150 * time.Millisecond, RetryOn: []string{"gateway-error", "reset"}}},
		{`{count: 2, retryOn: [retriable-status-codes], retriableStatusCodes: [502, 503]}`, &RetryPolicy{NumRetries: 2, RetryOn: []string{}, OnStatusCodes: []uint32{502, 503}}},
		{`{count: 2, retryOn: [5xx, retriable-status-codes], retriableStatusCodes: [418]}`, &RetryPolicy{NumRetries: 2, RetryOn: []string{"5xx"}, OnStatusCodes: []uint32{418}}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r, _ := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], retryPolicy: `+tc.policy+`}`))
			if diff := cmp.Diff(tc.want, r.Retry); diff != "" {
				t.Errorf("retries (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		policy string
		parts  []string
	}{
		{`{count: 1, retriableStatusCodes: [503]}`, []string{`spec.routes[0].retryPolicy.retriableStatusCodes needs "retriable-status-codes" in retryOn`}},
		{`{count: 1, retryOn: [retriable-status-codes], retriableStatusCodes: [700]}`, []string{"700 is not an HTTP status"}},
		{`{count: 1, retryOn: [sometimes]}`, []string{`spec.routes[0].retryPolicy.retryOn "sometimes" is not one of`}},
		// In the schema, but it needs retriable_headers, which HTTPProxy cannot express:
		// the proxy would refuse the route configuration.
		{`{count: 1, retryOn: [retriable-headers]}`, []string{`spec.routes[0].retryPolicy.retryOn "retriable-headers" is not one of`}},
		{`{count: 1, perTryTimeout: fast}`, []string{"spec.routes[0].retryPolicy.perTryTimeout"}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			invalidRoute(t, problemRoute, "", tc.parts, policyRoot(t, `{services: [{name: web, port: 80}], retryPolicy: `+tc.policy+`}`))
		})
	}
	t.Run("perTryTimeout over the response timeout", func(t *testing.T) {
		_, st := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], timeoutPolicy: {response: 1s}, retryPolicy: {count: 1, perTryTimeout: 2s}}`))
		wantProblem(t, "warnings", st.Warnings, problemRoute, "PerTryTimeoutIgnored", "perTryTimeout 2s is longer than timeoutPolicy.response (1s)")
	})
}

// failurePolicy (seed 004): retries and a passive health check, both on by default.
func TestHTTPProxyFailurePolicy(t *testing.T) {
	defaults := &OutlierDetection{Consecutive5xx: 5, Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionPercent: 50}
	for _, tc := range []struct {
		policy  string
		retry   *RetryPolicy
		outlier *OutlierDetection
	}{
		{`{}`, &RetryPolicy{NumRetries: 1, RetryOn: []string{"5xx"}}, defaults},
		{`{count: 3, perTryTimeout: 150ms, retryOn: [reset, connect-failure], consecutive5xx: 2, interval: 1s, baseEjectionTime: 5s, maxEjectionPercent: 100}`,
			&RetryPolicy{NumRetries: 3, PerTryTimeout: 150 * time.Millisecond, RetryOn: []string{"reset", "connect-failure"}},
			&OutlierDetection{Consecutive5xx: 2, Interval: time.Second, BaseEjectionTime: 5 * time.Second, MaxEjectionPercent: 100}},
		{`{count: 0}`, nil, defaults},
		{`{retryPolicyEnabled: false}`, nil, defaults},
		{`{passiveHealthCheckEnabled: false, count: 2}`, &RetryPolicy{NumRetries: 2, RetryOn: []string{"5xx"}}, nil},
		{`{retryPolicyEnabled: true, passiveHealthCheckEnabled: true, maxEjectionPercent: 0}`, &RetryPolicy{NumRetries: 1, RetryOn: []string{"5xx"}},
			&OutlierDetection{Consecutive5xx: 5, Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionPercent: 0}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r, _ := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], failurePolicy: `+tc.policy+`}`))
			if diff := cmp.Diff(tc.retry, r.Retry); diff != "" {
				t.Errorf("retries (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.outlier, r.Clusters[0].Cluster.Outlier); diff != "" {
				t.Errorf("outlier detection (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		route  string
		reason string
		parts  []string
	}{
		{`failurePolicy: {}, retryPolicy: {count: 2}`, "RetryPolicyConflict", []string{"spec.routes[0] sets both retryPolicy and failurePolicy", "use one of them"}},
		{`failurePolicy: {count: 2, passiveHealthCheckEnabled: false}, retryPolicy: {count: 2}`, "RetryPolicyConflict", []string{"use one of them"}},
		{`failurePolicy: {count: 101}`, "FailurePolicyInvalid", []string{"spec.routes[0].failurePolicy.count 101 must be 0-100"}},
		{`failurePolicy: {consecutive5xx: 0}`, "FailurePolicyInvalid", []string{"consecutive5xx 0 must be 1-1000"}},
		{`failurePolicy: {interval: 0s}`, "FailurePolicyInvalid", []string{"spec.routes[0].failurePolicy.interval must be positive"}},
		{`failurePolicy: {baseEjectionTime: later}`, "DurationInvalid", []string{"spec.routes[0].failurePolicy.baseEjectionTime"}},
		{`failurePolicy: {maxEjectionPercent: 101}`, "FailurePolicyInvalid", []string{"maxEjectionPercent 101 must be 0-100"}},
		{`failurePolicy: {retryOn: [often]}`, "RetryOnInvalid", []string{`spec.routes[0].failurePolicy.retryOn "often"`}},
		{`failurePolicy: {retryOn: [retriable-headers]}`, "RetryOnInvalid", []string{`spec.routes[0].failurePolicy.retryOn "retriable-headers"`}},
	} {
		t.Run(tc.route, func(t *testing.T) {
			invalidRoute(t, problemRoute, tc.reason, tc.parts, policyRoot(t, `{services: [{name: web, port: 80}], `+tc.route+`}`))
		})
	}
	t.Run("retryPolicy with failurePolicy's retries off", func(t *testing.T) {
		r, st := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], retryPolicy: {count: 4}, failurePolicy: {retryPolicyEnabled: false}}`))
		if len(st.Warnings) > 0 {
			t.Errorf("warnings %+v", st.Warnings)
		}
		if diff := cmp.Diff(&RetryPolicy{NumRetries: 4, RetryOn: []string{"5xx"}}, r.Retry); diff != "" {
			t.Errorf("retries (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(defaults, r.Clusters[0].Cluster.Outlier); diff != "" {
			t.Errorf("outlier detection (-want +got):\n%s", diff)
		}
	})
}

func TestHTTPProxyLoadBalancerPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy string
		lb     LoadBalancer
		hashes []HashPolicy
	}{
		{`{strategy: RoundRobin}`, "", nil},
		{`{}`, "", nil},
		{`{strategy: WeightedLeastRequest}`, LBWeightedLeastRequest, nil},
		{`{strategy: Random}`, LBRandom, nil},
		{`{strategy: Cookie}`, LBRingHash, []HashPolicy{{Cookie: "X-Contour-Session-Affinity", CookieGenerate: true, CookiePath: "/"}}},
		{`{strategy: RequestHash, requestHashPolicies: [{headerHashOptions: {headerName: X-User}, terminal: true}, {queryParameterHashOptions: {parameterName: session}}, {hashSourceIP: true}]}`,
			LBRingHash, []HashPolicy{{Header: "x-user", Terminal: true}, {QueryParameter: "session"}, {SourceIP: true}}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			r, st := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], loadBalancerPolicy: `+tc.policy+`}`))
			if len(st.Warnings) > 0 {
				t.Errorf("warnings %+v", st.Warnings)
			}
			if got := r.Clusters[0].Cluster.LoadBalancer; got != tc.lb {
				t.Errorf("load balancer = %q, want %q", got, tc.lb)
			}
			if diff := cmp.Diff(tc.hashes, r.HashPolicies); diff != "" {
				t.Errorf("hash policies (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("RequestHash without policies", func(t *testing.T) {
		r, st := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], loadBalancerPolicy: {strategy: RequestHash}}`))
		wantProblem(t, "warnings", st.Warnings, problemRoute, "HashPolicyMissing", "spec.routes[0].loadBalancerPolicy: strategy RequestHash without requestHashPolicies hashes the client address")
		if len(r.HashPolicies) != 0 {
			t.Errorf("hash policies %+v, want none: the translator hashes the client address", r.HashPolicies)
		}
		if r.Clusters[0].Cluster.LoadBalancer != LBRingHash {
			t.Errorf("load balancer = %q", r.Clusters[0].Cluster.LoadBalancer)
		}
	})
	for _, tc := range []struct {
		policy, reason string
		parts          []string
	}{
		{`{strategy: Fastest}`, "LoadBalancerStrategyInvalid", []string{`spec.routes[0].loadBalancerPolicy.strategy "Fastest" is not one of`}},
		{`{strategy: RequestHash, requestHashPolicies: [{hashSourceIP: true, headerHashOptions: {headerName: x}}]}`, "HashPolicyInvalid", []string{"requestHashPolicies[0] must set exactly one of"}},
		{`{strategy: RequestHash, requestHashPolicies: [{headerHashOptions: {headerName: "a b"}}]}`, "HashPolicyInvalid", []string{`headerName "a b" is not a valid header name`}},
		{`{strategy: RequestHash, requestHashPolicies: [{queryParameterHashOptions: {}}]}`, "HashPolicyInvalid", []string{"parameterName is required"}},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			invalidRoute(t, problemRoute, tc.reason, tc.parts, policyRoot(t, `{services: [{name: web, port: 80}], loadBalancerPolicy: `+tc.policy+`}`))
		})
	}
}

func TestHTTPProxyHealthCheckPolicy(t *testing.T) {
	r, _ := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], healthCheckPolicy: {path: /healthz}}`))
	want := &HealthCheck{Path: "/healthz", Host: DefaultHealthCheckHost, Interval: 5 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 2}
	if diff := cmp.Diff(want, r.Clusters[0].Cluster.HealthCheck); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	r, _ = onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], healthCheckPolicy: {path: /hz, host: check.local, intervalSeconds: 10, timeoutSeconds: 1, unhealthyThresholdCount: 4, healthyThresholdCount: 1, expectedStatuses: [{start: 200, end: 300}, {start: 404, end: 405}]}}`))
	want = &HealthCheck{Path: "/hz", Host: "check.local", Interval: 10 * time.Second, Timeout: time.Second, UnhealthyThreshold: 4, HealthyThreshold: 1,
		ExpectedStatuses: []StatusRange{{200, 300}, {404, 405}}}
	if diff := cmp.Diff(want, r.Clusters[0].Cluster.HealthCheck); diff != "" {
		t.Errorf("written out (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ policy, part string }{
		{`{path: hz}`, `spec.routes[0].healthCheckPolicy.path "hz" must start with "/"`},
		{`{path: /hz, expectedStatuses: [{start: 300, end: 200}]}`, "expectedStatuses[0] [300, 200) must be a range"},
		{`{path: /hz, expectedStatuses: [{start: 99, end: 200}]}`, "expectedStatuses[0]"},
		{`{path: /hz, intervalSeconds: -1}`, "spec.routes[0].healthCheckPolicy.intervalSeconds -1 must be"},
		{`{path: /hz, healthyThresholdCount: 1001}`, "healthyThresholdCount 1001 must be"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			invalidRoute(t, problemRoute, "HealthCheckInvalid", []string{tc.part}, policyRoot(t, `{services: [{name: web, port: 80}], healthCheckPolicy: `+tc.policy+`}`))
		})
	}
}

// pathRewritePolicy replaces the route's prefix: the entry naming the route's merged
// prefix, else the entry without a prefix.
func TestHTTPProxyPathRewritePolicy(t *testing.T) {
	g := build(
		proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: p.example.com}, includes: [{name: blog, namespace: team, conditions: [{prefix: /blog}]}, {name: blog, namespace: team, conditions: [{prefix: /news}]}], routes: [{conditions: [{prefix: /api}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /v1}]}}]}}`),
		proxy(t, `
metadata: {name: blog, namespace: team}
spec:
  routes:
  - services: [{name: blog, port: 80}]
    pathRewritePolicy: {replacePrefix: [{prefix: /blog, replacement: /}, {prefix: /news, replacement: /n}]}
  - conditions: [{prefix: /posts}]
    services: [{name: blog, port: 80}]
    pathRewritePolicy: {replacePrefix: [{prefix: /blog, replacement: /b}, {replacement: /fallback}]}
  - conditions: [{prefix: /raw}]
    services: [{name: blog, port: 80}]
    pathRewritePolicy: {replacePrefix: [{prefix: /blog, replacement: /b}]}
`),
	)
	got := map[string]string{}
	for _, r := range routesOfHost(t, g, "p.example.com") {
		got[r.Path.Value] = r.PrefixRewrite
	}
	want := map[string]string{
		"/api":        "/v1",
		"/blog":       "/",
		"/blog/":      "/", // the twin of "/blog": "/blog/x" goes up as "/x", not "//x"
		"/news":       "/n",
		"/blog/posts": "/fallback",
		"/news/posts": "/fallback",
		"/blog/raw":   "",
		"/news/raw":   "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prefix rewrites by path (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ route, part string }{
		{`{conditions: [{exact: /a}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /b}]}}`, "spec.routes[0].pathRewritePolicy needs a prefix condition"},
		{`{conditions: [{regex: /a.*}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /b}]}}`, "needs a prefix condition"},
		{`{services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: b}]}}`, `replacePrefix[0].replacement "b" must start with "/"`},
		{`{services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{prefix: /a, replacement: /b}, {prefix: /a, replacement: /c}]}}`, `replacePrefix[1]: prefix "/a" is replaced twice`},
	} {
		t.Run(tc.route, func(t *testing.T) {
			invalidRoute(t, problemRoute, "PathRewriteInvalid", []string{tc.part}, policyRoot(t, tc.route))
		})
	}
}

// A prefix rewrite ending in "/" on a segment prefix ("/api" to "/") gets a twin route
// on the string prefix "/api/" with the same rewrite, so that "/api/x" goes upstream as
// "/x", not "//x". The twin follows its route: it is served only where its route is, and
// a route or a seal with the twin's conditions replaces it.
func TestHTTPProxyPathRewriteTwin(t *testing.T) {
	// upstream is the path a request goes upstream with: the proxy replaces the part
	// of the path the route's prefix matched.
	upstream := func(t *testing.T, routes []*Route, path string) string {
		r := firstMatch(t, routes, req(path))
		switch {
		case r == nil:
			return "none"
		case r.DirectStatus != 0:
			return fmt.Sprint(r.DirectStatus)
		case r.PrefixRewrite == "":
			return path
		}
		return r.PrefixRewrite + strings.TrimPrefix(path, r.Path.Value)
	}
	for _, tc := range []struct {
		name, route string
		want        []string
		paths       map[string]string
	}{
		{"to /", `{conditions: [{prefix: /api}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}}`,
			[]string{"StringPrefix /api/ -> team/web/80", "Prefix /api -> team/web/80"},
			map[string]string{"/api": "/", "/api/x": "/x", "/api/x/y/": "/x/y/", "/apix": "none"}},
		{"to a directory", `{conditions: [{prefix: /api}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /v1/}]}}`,
			[]string{"StringPrefix /api/ -> team/web/80", "Prefix /api -> team/web/80"},
			map[string]string{"/api": "/v1/", "/api/x": "/v1/x"}},
		{"no slash, no twin", `{conditions: [{prefix: /api}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /v1}]}}`,
			[]string{"Prefix /api -> team/web/80"},
			map[string]string{"/api": "/v1", "/api/x": "/v1/x"}},
		{"a string prefix needs none", `{conditions: [{prefix: /api/}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}}`,
			[]string{"StringPrefix /api/ -> team/web/80"},
			map[string]string{"/api/x": "/x", "/api": "none"}},
		{"nor does /", `{services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}}`,
			[]string{"Prefix / -> team/web/80"},
			map[string]string{"/x": "/x"}},
		{"a route on the twin's conditions replaces it", `{conditions: [{prefix: /api}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}}, {conditions: [{prefix: /api/}], services: [{name: api, port: 80}]}`,
			[]string{"StringPrefix /api/ -> team/api/80", "Prefix /api -> team/web/80"},
			map[string]string{"/api": "/", "/api/x": "/api/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(policyRoot(t, tc.route), svc("team", "web", ":80"), svc("team", "api", ":80"))
			wantClean(t, g, "team", "root")
			if diff := cmp.Diff(tc.want, proxyHTTP(g, "p.example.com")); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			routes := routesOfHost(t, g, "p.example.com")
			for path, want := range tc.paths {
				if got := upstream(t, routes, path); got != want {
					t.Errorf("%s goes upstream as %s, want %s", path, got, want)
				}
			}
		})
	}
	t.Run("an include's seal on the twin's conditions replaces it", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: p.example.com}, routes: [{conditions: [{prefix: /api}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}}], includes: [{name: v2, conditions: [{prefix: /api/}]}]}}`),
			proxy(t, `{metadata: {name: v2}, spec: {routes: [{conditions: [{prefix: /v2}], services: [{name: v2, port: 80}]}]}}`),
		)
		if diff := cmp.Diff([]string{"Prefix /api/v2 -> default/v2/80", "StringPrefix /api/ -> 404", "Prefix /api -> default/web/80"}, proxyHTTP(g, "p.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
		routes := routesOfHost(t, g, "p.example.com")
		for path, want := range map[string]string{"/api": "/", "/api/v2": "/api/v2", "/api/v1": "404"} {
			if got := upstream(t, routes, path); got != want {
				t.Errorf("%s goes upstream as %s, want %s", path, got, want)
			}
		}
	})
	for _, tc := range []struct {
		name, b, c string
		want       []string
	}{
		// c's route loses to b's, closer to the root: c's twin must not serve /x/y/...
		{"the losing route's twin is not served", `{services: [{name: b, port: 80}]}`, `{services: [{name: c, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}}`,
			[]string{"Prefix /x/y -> default/b/80", "Prefix /x -> 404"}},
		{"the winning route's twin is", `{services: [{name: b, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}}`, `{services: [{name: c, port: 80}]}`,
			[]string{"StringPrefix /x/y/ -> default/b/80", "Prefix /x/y -> default/b/80", "Prefix /x -> 404"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(
				proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: p.example.com}, includes: [{name: a, conditions: [{prefix: /x}]}, {name: b, conditions: [{prefix: /x/y}]}]}}`),
				proxy(t, `{metadata: {name: a}, spec: {includes: [{name: c, conditions: [{prefix: /y}]}]}}`),
				proxy(t, `{metadata: {name: b}, spec: {routes: [`+tc.b+`]}}`),
				proxy(t, `{metadata: {name: c}, spec: {routes: [`+tc.c+`]}}`),
			)
			wantWarning(t, g, "default", "c", problemRoute, "DuplicateMatchConditions", "HTTPProxy default/b, closer to the root")
			if diff := cmp.Diff(tc.want, proxyHTTP(g, "p.example.com")); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("on plain HTTP only when the route is served there", func(t *testing.T) {
		cert := testutil.SelfSigned("p.example.com")
		for _, permit := range []bool{false, true} {
			g := build(tlsSecret("team", "cert", cert.CertPEM, cert.KeyPEM), svc("team", "web", ":80"), proxy(t, fmt.Sprintf(`{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: p.example.com, tls: {secretName: cert}}, routes: [{conditions: [{prefix: /api}], services: [{name: web, port: 80}], pathRewritePolicy: {replacePrefix: [{replacement: /}]}, permitInsecure: %t}]}}`, permit)))
			want := []string{"Prefix /api -> https"}
			if permit {
				want = []string{"StringPrefix /api/ -> team/web/80", "Prefix /api -> team/web/80"}
			}
			if diff := cmp.Diff(want, proxyHTTP(g, "p.example.com")); diff != "" {
				t.Errorf("permitInsecure %t: HTTP routes (-want +got):\n%s", permit, diff)
			}
			if diff := cmp.Diff([]string{"StringPrefix /api/ -> team/web/80", "Prefix /api -> team/web/80"}, proxyHTTPS(g, "p.example.com")); diff != "" {
				t.Errorf("permitInsecure %t: HTTPS routes (-want +got):\n%s", permit, diff)
			}
		}
	})
}

// Headers policies at route and service level: set and remove; Host on a route's
// requests is a host rewrite; a "%" is sent as written unless it starts one of the
// supported variables, and %CONTOUR_NAMESPACE% and the service variables are filled in.
func TestHTTPProxyHeadersPolicies(t *testing.T) {
	r, st := onlyRoute(t, policyRoot(t, `
{services: [{name: web, port: 80,
   requestHeadersPolicy: {set: [{name: Host, value: svc.example.com}, {name: x-svc, value: "%CONTOUR_SERVICE_NAME%:%CONTOUR_SERVICE_PORT%"}]},
   responseHeadersPolicy: {set: [{name: x-served-by, value: "%CONTOUR_NAMESPACE%/%CONTOUR_SERVICE_NAME%"}], remove: [server]}}],
 requestHeadersPolicy: {set: [{name: host, value: new.example.com}, {name: x-rate, value: "100%"}, {name: x-ns, value: "%CONTOUR_NAMESPACE%"}, {name: x-client, value: "%REQ(X-Forwarded-For)% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"}, {name: x-odd, value: "%UNKNOWN% %% %"}], remove: [x-debug, Cookie]},
 responseHeadersPolicy: {set: [{name: strict-transport-security, value: max-age=31536000}], remove: [x-powered-by]}}`))
	if len(st.Warnings) > 0 {
		t.Errorf("warnings %+v", st.Warnings)
	}
	if r.HostRewrite != "new.example.com" {
		t.Errorf("host rewrite = %q", r.HostRewrite)
	}
	wantReq := &HeadersPolicy{
		Set: []HeaderValue{
			{Name: "X-Rate", Value: "100%%"},
			{Name: "X-Ns", Value: "team"},
			{Name: "X-Client", Value: "%REQ(X-Forwarded-For)% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%"},
			{Name: "X-Odd", Value: "%%UNKNOWN%% %%%% %%"},
		},
		Remove: []string{"X-Debug", "Cookie"},
	}
	if diff := cmp.Diff(wantReq, r.RequestHeaders); diff != "" {
		t.Errorf("route request headers (-want +got):\n%s", diff)
	}
	// The service's removal of Server is the route's (its only service): see
	// TestHTTPProxyServerHeader.
	if diff := cmp.Diff(&HeadersPolicy{Set: []HeaderValue{{Name: "Strict-Transport-Security", Value: "max-age=31536000"}}, Remove: []string{"X-Powered-By", "Server"}}, r.ResponseHeaders); diff != "" {
		t.Errorf("route response headers (-want +got):\n%s", diff)
	}
	wc := r.Clusters[0]
	if diff := cmp.Diff(&HeadersPolicy{Set: []HeaderValue{{Name: "Host", Value: "svc.example.com"}, {Name: "X-Svc", Value: "web:80"}}}, wc.RequestHeaders); diff != "" {
		t.Errorf("service request headers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&HeadersPolicy{Set: []HeaderValue{{Name: "X-Served-By", Value: "team/web"}}}, wc.ResponseHeaders); diff != "" {
		t.Errorf("service response headers (-want +got):\n%s", diff)
	}

	// A Host-only request policy is a rewrite and no header policy.
	r, _ = onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: Host, value: h.example.com}]}}`))
	if r.HostRewrite != "h.example.com" || r.RequestHeaders != nil {
		t.Errorf("host rewrite %q, request headers %+v", r.HostRewrite, r.RequestHeaders)
	}

	for _, tc := range []struct{ route, part string }{
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {set: [{name: Host, value: x}]}}`, "spec.routes[0].responseHeadersPolicy.set[0].name: Host is a request header: a response has none to set or remove"},
		{`{services: [{name: web, port: 80, responseHeadersPolicy: {set: [{name: host, value: x}]}}]}`, "spec.routes[0].services[0].responseHeadersPolicy.set[0].name: Host is a request header"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: "x a", value: x}]}}`, `set[0].name: "x a" is not a valid header name`},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: x-a, value: "a\nb"}]}}`, "set[0].value may not contain CR, LF or NUL"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: x-a, value: a}, {name: X-A, value: b}]}}`, `set[1]: header "X-A" is set twice`},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {remove: [host]}}`, "spec.routes[0].requestHeadersPolicy.remove[0]: Host cannot be removed: every request has one; set it to rewrite it"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {remove: [":path"]}}`, `spec.routes[0].requestHeadersPolicy.remove[0]: ":path" is a pseudo-header, which no headers policy can change; rewrite the path with pathRewritePolicy, and the authority by setting Host in requestHeadersPolicy`},
	} {
		t.Run(tc.route, func(t *testing.T) {
			invalidRoute(t, problemRoute, "HeaderPolicyInvalid", []string{tc.part}, policyRoot(t, tc.route))
		})
	}
}

// Dynamic header values as Contour reads them: its Envoy operators are passed through,
// every other "%" is escaped, the service variables are filled in a service's policy and
// sent as written (with a warning) in a route's; a Host of %REQ(name)% on a route takes
// the Host from that header, and any other Host is a literal, as in Contour.
func TestHTTPProxyDynamicHeaderValues(t *testing.T) {
	all := "%DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_LOCAL_ADDRESS% " +
		"%DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_LOCAL_PORT% %DOWNSTREAM_LOCAL_URI_SAN% %DOWNSTREAM_PEER_URI_SAN% " +
		"%DOWNSTREAM_LOCAL_SUBJECT% %DOWNSTREAM_PEER_SUBJECT% %DOWNSTREAM_PEER_ISSUER% %DOWNSTREAM_TLS_SESSION_ID% " +
		"%DOWNSTREAM_TLS_CIPHER% %DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_PEER_FINGERPRINT_256% %DOWNSTREAM_PEER_FINGERPRINT_1% " +
		"%DOWNSTREAM_PEER_SERIAL% %DOWNSTREAM_PEER_CERT% %DOWNSTREAM_PEER_CERT_V_START% %DOWNSTREAM_PEER_CERT_V_END% " +
		"%HOSTNAME% %PROTOCOL% %UPSTREAM_REMOTE_ADDRESS% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% " +
		"%REQ(Host)% %REQ(:authority)% %REQ(x-a?x-b)% %REQ(x-a):10% %REQ(:path?x_b):3%"
	r, st := onlyRoute(t, policyRoot(t, fmt.Sprintf(`
{services: [{name: web, port: 80, requestHeadersPolicy: {set: [{name: x-all, value: %q}, {name: Host, value: "%%CONTOUR_NAMESPACE%%.internal"}]}}],
 requestHeadersPolicy: {set: [{name: Host, value: "%%REQ(x-rewrite)%%"}, {name: x-all, value: %q}, {name: x-escaped, value: "%%START_TIME%% %%REQ(a b)%% %%REQ(x):y%% %%REQ(x):12345678901234567890%% 5%%"},
   {name: x-svc, value: "%%CONTOUR_SERVICE_NAME%%:%%CONTOUR_SERVICE_PORT%%@%%CONTOUR_NAMESPACE%%"}]},
 responseHeadersPolicy: {set: [{name: x-all, value: %q}]}}`, all, all, all)))
	if r.HostRewrite != "" || r.HostRewriteHeader != "X-Rewrite" {
		t.Errorf("host rewrite %q, from header %q; want from X-Rewrite", r.HostRewrite, r.HostRewriteHeader)
	}
	wantReq := &HeadersPolicy{Set: []HeaderValue{
		{Name: "X-All", Value: all},
		// A length of 20 digits may be beyond Envoy's size_t, which would NACK the routes.
		{Name: "X-Escaped", Value: "%%START_TIME%% %%REQ(a b)%% %%REQ(x):y%% %%REQ(x):12345678901234567890%% 5%%"},
		{Name: "X-Svc", Value: "%%CONTOUR_SERVICE_NAME%%:%%CONTOUR_SERVICE_PORT%%@team"},
	}}
	if diff := cmp.Diff(wantReq, r.RequestHeaders); diff != "" {
		t.Errorf("route request headers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&HeadersPolicy{Set: []HeaderValue{{Name: "X-All", Value: all}}}, r.ResponseHeaders); diff != "" {
		t.Errorf("route response headers (-want +got):\n%s", diff)
	}
	wantSvc := &HeadersPolicy{Set: []HeaderValue{{Name: "X-All", Value: all}, {Name: "Host", Value: "%CONTOUR_NAMESPACE%.internal"}}}
	if diff := cmp.Diff(wantSvc, r.Clusters[0].RequestHeaders); diff != "" {
		t.Errorf("service request headers (-want +got):\n%s", diff)
	}
	var reasons []string
	for _, w := range st.Warnings {
		reasons = append(reasons, w.Reason+": "+w.Message)
	}
	if diff := cmp.Diff([]string{"HeaderPolicyLiteral: spec.routes[0].requestHeadersPolicy.set[3]: %CONTOUR_SERVICE_NAME% and %CONTOUR_SERVICE_PORT% name a service, so a route's headers policy sends them as they are written; use them in a service's headers policy to get its name and port"}, reasons); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		route           string
		literal, header string
		warning         string
	}{
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: Host, value: "50%"}]}}`, "50%", "", ""},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: host, value: "%REQ(x-a)%.example.com"}]}}`, "", "X-A",
			`HostRewriteHeaderOnly: spec.routes[0].requestHeadersPolicy.set[0]: Host "%REQ(x-a)%.example.com" takes the Host from header x-a alone and ignores the rest of the value; write "%REQ(x-a)%"`},
		{`{services: [{name: web, port: 80, requestHeadersPolicy: {set: [{name: Host, value: "%REQ(x-a)%"}]}}]}`, "", "",
			`HostRewriteIgnored: spec.routes[0].services[0].requestHeadersPolicy.set[0]: Host "%REQ(x-a)%" takes the Host from a request header, which only a route's requestHeadersPolicy can do: this service's requests keep their Host; move it to the route's requestHeadersPolicy`},
	} {
		r, st := onlyRoute(t, policyRoot(t, tc.route))
		if r.HostRewrite != tc.literal || r.HostRewriteHeader != tc.header {
			t.Errorf("%s: host rewrite %q, from header %q; want %q, %q", tc.route, r.HostRewrite, r.HostRewriteHeader, tc.literal, tc.header)
		}
		if r.Clusters[0].RequestHeaders != nil {
			t.Errorf("%s: service request headers %+v, want none", tc.route, r.Clusters[0].RequestHeaders)
		}
		var warning string
		for _, w := range st.Warnings {
			warning = w.Reason + ": " + w.Message
		}
		if warning != tc.warning {
			t.Errorf("%s: warning %q, want %q", tc.route, warning, tc.warning)
		}
	}
}

// Headers that the data planes write themselves, drop when forwarding, or frame the
// message with cannot be named in a headers policy: the object is invalid, and the
// status names the field, the header, why, and what to do instead when there is a way.
func TestHTTPProxyHeaderNamesRefused(t *testing.T) {
	for _, tc := range []struct{ route, part string }{
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: ":authority", value: x}]}}`,
			`spec.routes[0].requestHeadersPolicy.set[0].name: ":authority" is a pseudo-header, which no headers policy can change; rewrite the path with pathRewritePolicy, and the authority by setting Host in requestHeadersPolicy`},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {remove: [":status"]}}`,
			`spec.routes[0].responseHeadersPolicy.remove[0]: ":status" is a pseudo-header, which no headers policy can change; a route's status comes from its service or its directResponsePolicy`},
		{`{services: [{name: web, port: 80, requestHeadersPolicy: {set: [{name: ":path", value: /x}]}}]}`,
			`spec.routes[0].services[0].requestHeadersPolicy.set[0].name: ":path" is a pseudo-header`},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {set: [{name: connection, value: close}]}}`,
			"spec.routes[0].responseHeadersPolicy.set[0].name: Connection is a hop-by-hop header: each data plane drops it when forwarding and writes its own for each connection, so no headers policy can set or remove it"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {remove: [Connection]}}`, "spec.routes[0].requestHeadersPolicy.remove[0]: Connection is a hop-by-hop header"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: Keep-Alive, value: "timeout=5"}]}}`, "set[0].name: Keep-Alive is a hop-by-hop header"},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {remove: [proxy-connection]}}`, "remove[0]: Proxy-Connection is a hop-by-hop header"},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {set: [{name: Transfer-Encoding, value: gzip}]}}`, "set[0].name: Transfer-Encoding is a hop-by-hop header"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {remove: [TE]}}`, "remove[0]: Te is a hop-by-hop header"},
		{`{services: [{name: web, port: 80, responseHeadersPolicy: {set: [{name: Trailer, value: X-Checksum}]}}]}`, "spec.routes[0].services[0].responseHeadersPolicy.set[0].name: Trailer is a hop-by-hop header"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: Upgrade, value: websocket}]}}`,
			"spec.routes[0].requestHeadersPolicy.set[0].name: Upgrade is a hop-by-hop header that no headers policy can set or remove; to let clients upgrade a route's requests to WebSocket, set enableWebsockets: true on the route"},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {set: [{name: content-length, value: "0"}]}}`,
			"spec.routes[0].responseHeadersPolicy.set[0].name: Content-Length is written by the data plane from the body it forwards; no headers policy can set or remove it"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {remove: [Content-Length]}}`, "remove[0]: Content-Length is written by the data plane"},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {remove: [x-request-id]}}`,
			"spec.routes[0].responseHeadersPolicy.remove[0]: X-Request-Id is the request's id, which Portico generates for each request, sends upstream and returns in the response; no headers policy can set or remove it"},
		{`{services: [{name: web, port: 80}], requestHeadersPolicy: {set: [{name: X-Request-ID, value: mine}]}}`, "set[0].name: X-Request-Id is the request's id"},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {remove: [Host]}}`, "spec.routes[0].responseHeadersPolicy.remove[0]: Host is a request header: a response has none to set or remove"},
		{`{services: [{name: web, port: 80, requestHeadersPolicy: {remove: [host]}}]}`, "spec.routes[0].services[0].requestHeadersPolicy.remove[0]: Host cannot be removed"},
		{`{services: [{name: web, port: 80}], responseHeadersPolicy: {remove: [date]}}`,
			"spec.routes[0].responseHeadersPolicy.remove[0]: Date cannot be removed: the data plane adds one to every response that has none (it can be set)"},
	} {
		t.Run(tc.route, func(t *testing.T) {
			invalidRoute(t, problemRoute, "HeaderPolicyInvalid", []string{tc.part}, policyRoot(t, tc.route))
		})
	}
	// What the data planes leave alone can be changed: Date set on responses, Server,
	// X-Forwarded-For and Proxy-Authorization on requests.
	r, _ := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}],
 requestHeadersPolicy: {set: [{name: server, value: s}, {name: proxy-authorization, value: "Basic eDp5"}], remove: [x-forwarded-for, date]},
 responseHeadersPolicy: {set: [{name: date, value: "Thu, 01 Jan 2037 00:00:00 GMT"}]}}`))
	want := &HeadersPolicy{Set: []HeaderValue{{Name: "Server", Value: "s"}, {Name: "Proxy-Authorization", Value: "Basic eDp5"}}, Remove: []string{"X-Forwarded-For", "Date"}}
	if diff := cmp.Diff(want, r.RequestHeaders); diff != "" {
		t.Errorf("request headers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&HeadersPolicy{Set: []HeaderValue{{Name: "Date", Value: "Thu, 01 Jan 2037 00:00:00 GMT"}}}, r.ResponseHeaders); diff != "" {
		t.Errorf("response headers (-want +got):\n%s", diff)
	}
}

// Server is decided per route: Portico's own Server header is set for the whole route
// configuration after a service's changes (translate), so a change that every service of
// a route makes alike becomes the route's, a route's own change wins over its services',
// and services that change Server differently make the object invalid.
func TestHTTPProxyServerHeader(t *testing.T) {
	for _, tc := range []struct {
		name, route string
		want        *HeadersPolicy // the route's response headers
		services    []*HeadersPolicy
	}{
		{"a route's removal", `{services: [{name: web, port: 80}], responseHeadersPolicy: {remove: [server]}}`,
			&HeadersPolicy{Remove: []string{"Server"}}, []*HeadersPolicy{nil}},
		{"a route's value", `{services: [{name: web, port: 80}], responseHeadersPolicy: {set: [{name: Server, value: "web 100%"}]}}`,
			&HeadersPolicy{Set: []HeaderValue{{Name: "Server", Value: "web 100%%"}}}, []*HeadersPolicy{nil}},
		{"the only service's", `{services: [{name: web, port: 80, responseHeadersPolicy: {set: [{name: server, value: "%CONTOUR_SERVICE_NAME%"}, {name: x-a, value: a}]}}]}`,
			&HeadersPolicy{Set: []HeaderValue{{Name: "Server", Value: "web"}}}, []*HeadersPolicy{{Set: []HeaderValue{{Name: "X-A", Value: "a"}}}}},
		{"every service's alike", `{services: [{name: web, port: 80, responseHeadersPolicy: {remove: [Server]}}, {name: api, port: 80, responseHeadersPolicy: {remove: [server, x-b]}}]}`,
			&HeadersPolicy{Remove: []string{"Server"}}, []*HeadersPolicy{nil, {Remove: []string{"X-B"}}}},
		{"set and removed is set", `{services: [{name: web, port: 80, responseHeadersPolicy: {set: [{name: server, value: w}], remove: [server]}}]}`,
			&HeadersPolicy{Set: []HeaderValue{{Name: "Server", Value: "w"}}}, []*HeadersPolicy{nil}},
		{"the route's wins over its services'", `{services: [{name: web, port: 80, responseHeadersPolicy: {remove: [server]}}, {name: api, port: 80, responseHeadersPolicy: {set: [{name: server, value: api}]}}], responseHeadersPolicy: {set: [{name: server, value: r}]}}`,
			&HeadersPolicy{Set: []HeaderValue{{Name: "Server", Value: "r"}}}, []*HeadersPolicy{nil, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := onlyRoute(t, policyRoot(t, tc.route))
			if diff := cmp.Diff(tc.want, r.ResponseHeaders); diff != "" {
				t.Errorf("route response headers (-want +got):\n%s", diff)
			}
			var got []*HeadersPolicy
			for _, wc := range r.Clusters {
				got = append(got, wc.ResponseHeaders)
			}
			if diff := cmp.Diff(tc.services, got); diff != "" {
				t.Errorf("services' response headers (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct{ route, part string }{
		{`{services: [{name: web, port: 80, responseHeadersPolicy: {remove: [server]}}, {name: api, port: 80}]}`,
			"the services of spec.routes[0] change the Server response header differently (services[0] removes it, services[1] leaves it): Portico decides Server per route: change it in spec.routes[0].responseHeadersPolicy, or alike in every service of the route"},
		{`{services: [{name: web, port: 80, mirror: true}, {name: web, port: 80, responseHeadersPolicy: {set: [{name: server, value: "50%"}]}}, {name: api, port: 80, responseHeadersPolicy: {set: [{name: server, value: b}]}}]}`,
			`(services[1] sets it to "50%", services[2] sets it to "b")`},
		{`{services: [{name: web, port: 80, responseHeadersPolicy: {set: [{name: server, value: "%CONTOUR_SERVICE_NAME%"}]}}, {name: api, port: 80, responseHeadersPolicy: {set: [{name: server, value: "%CONTOUR_SERVICE_NAME%"}]}}]}`,
			`(services[0] sets it to "web", services[1] sets it to "api")`},
	} {
		t.Run(tc.route, func(t *testing.T) {
			objs := []runtime.Object{policyRoot(t, tc.route), svc("team", "api", ":80")}
			invalidRoute(t, problemRoute, "HeaderPolicyInvalid", []string{tc.part}, objs...)
		})
	}
}

func TestHTTPProxyRedirectAndDirectResponse(t *testing.T) {
	r, _ := onlyRoute(t, policyRoot(t, `{requestRedirectPolicy: {scheme: https, hostname: new.example.com, port: 8443, statusCode: 301, path: /new}}`))
	if diff := cmp.Diff(&Redirect{Scheme: "https", Hostname: "new.example.com", Port: 8443, StatusCode: 301, Path: "/new"}, r.Redirect); diff != "" {
		t.Errorf("redirect (-want +got):\n%s", diff)
	}
	if len(r.Clusters) != 0 || r.DirectStatus != 0 {
		t.Errorf("a redirect route also has clusters %v or status %d", r.Clusters, r.DirectStatus)
	}
	r, _ = onlyRoute(t, policyRoot(t, `{requestRedirectPolicy: {prefix: /v2}}`))
	if diff := cmp.Diff(&Redirect{StatusCode: 302, Prefix: "/v2"}, r.Redirect); diff != "" {
		t.Errorf("redirect defaults (-want +got):\n%s", diff)
	}
	r, _ = onlyRoute(t, policyRoot(t, `{directResponsePolicy: {statusCode: 418, body: "I'm a teapot"}}`))
	if r.DirectStatus != 418 || r.DirectBody != "I'm a teapot" || len(r.Clusters) != 0 || r.Redirect != nil {
		t.Errorf("direct response route = %+v", r)
	}
	for _, tc := range []struct{ route, reason, part string }{
		{`{requestRedirectPolicy: {statusCode: 304}}`, "RedirectInvalid", "statusCode 304 must be 301, 302, 303, 307 or 308"},
		{`{requestRedirectPolicy: {scheme: ftp}}`, "RedirectInvalid", `scheme "ftp" must be http or https`},
		{`{requestRedirectPolicy: {port: 0}}`, "RedirectInvalid", "port 0 must be 1-65535"},
		{`{requestRedirectPolicy: {path: /a, prefix: /b}}`, "RedirectInvalid", "path and prefix are exclusive"},
		{`{requestRedirectPolicy: {path: a}}`, "RedirectInvalid", `path "a" must start with "/"`},
		{`{requestRedirectPolicy: {hostname: "bad host"}}`, "RedirectInvalid", `hostname "bad host" is not a host name`},
		{`{requestRedirectPolicy: {hostname: ""}}`, "RedirectInvalid", "leave hostname out to keep the request's"},
		{`{directResponsePolicy: {statusCode: 600}}`, "DirectResponseInvalid", "statusCode 600 must be 200-599"},
		{`{directResponsePolicy: {statusCode: 200, body: ` + strings.Repeat("x", 4097) + `}}`, "DirectResponseInvalid", "body is 4097 bytes; at most 4096"},
		{`{directResponsePolicy: {statusCode: 200}, services: [{name: web, port: 80}]}`, "InvalidAction", "must have exactly one of services, requestRedirectPolicy, directResponsePolicy (it has 2)"},
		{`{conditions: [{prefix: /a}]}`, "InvalidAction", "(it has 0)"},
	} {
		t.Run(tc.reason+" "+tc.part, func(t *testing.T) {
			invalidRoute(t, problemRoute, tc.reason, []string{tc.part}, policyRoot(t, tc.route))
		})
	}
}

func TestHTTPProxyWebsocketsAndWeights(t *testing.T) {
	r, _ := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}], enableWebsockets: true}`))
	if !r.Websocket {
		t.Errorf("websockets not enabled")
	}
	r, _ = onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80}]}`))
	if r.Websocket {
		t.Errorf("websockets enabled by default")
	}
	for _, tc := range []struct {
		services string
		want     string
	}{
		{`[{name: web, port: 80}, {name: api, port: 80}]`, "team/web/80=1 team/api/80=1"},
		{`[{name: web, port: 80, weight: 90}, {name: api, port: 80, weight: 10}]`, "team/web/80=90 team/api/80=10"},
		{`[{name: web, port: 80, weight: 3}, {name: api, port: 80}]`, "team/web/80=3 team/api/80=0"},
		{`[{name: web, port: 80, weight: 0}, {name: api, port: 80, weight: 0}]`, "team/web/80=1 team/api/80=1"},
		{`[{name: web, port: 80, weight: 7}]`, "team/web/80=7"},
	} {
		t.Run(tc.services, func(t *testing.T) {
			r, _ := onlyRoute(t, policyRoot(t, `{services: `+tc.services+`}`))
			if got := routeTarget(r); got != tc.want {
				t.Errorf("clusters = %s, want %s", got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ services, reason, part string }{
		{`[{name: web, port: 80, weight: -1}]`, "WeightInvalid", "spec.routes[0].services[0].weight -1 must not be negative"},
		{`[{name: web, port: 70000}]`, "PortInvalid", "port 70000 must be 1-65535"},
		{`[{name: "", port: 80}]`, "NameMissing", "spec.routes[0].services[0].name is required"},
		{`[{name: web, port: 80, mirror: true}]`, "NoServices", "every service is a mirror"},
	} {
		t.Run(tc.services, func(t *testing.T) {
			invalidRoute(t, problemService, tc.reason, []string{tc.part}, policyRoot(t, `{services: `+tc.services+`}`))
		})
	}
}

// Upstream protocols and certificate validation, per service.
func TestHTTPProxyUpstreamProtocols(t *testing.T) {
	ca := testutil.SelfSigned("backend.example.com")
	caSecret := func(ns, name string) runtime.Object {
		s := tlsSecret(ns, name, ca.CertPEM, ca.KeyPEM)
		s.Type = "Opaque"
		s.Data = map[string][]byte{"ca.crt": ca.CertPEM}
		return s
	}
	for _, p := range []string{"h2", "h2c", "tls"} {
		t.Run(p, func(t *testing.T) {
			r, _ := onlyRoute(t, policyRoot(t, `{services: [{name: web, port: 80, protocol: `+p+`}]}`))
			c := r.Clusters[0].Cluster
			if c.Protocol != p || c.UpstreamValidation != nil {
				t.Errorf("cluster protocol %q, validation %+v; want %s unverified", c.Protocol, c.UpstreamValidation, p)
			}
		})
	}
	t.Run("validation", func(t *testing.T) {
		r, _ := onlyRoute(t, caSecret("team", "ca"), policyRoot(t, `{services: [{name: web, port: 80, protocol: tls, validation: {caSecret: ca, subjectName: backend.example.com, subjectNames: [backend.example.com, alt.example.com]}}]}`))
		want := &UpstreamValidation{CAName: "team/ca", CACert: ca.CertPEM, SubjectNames: []string{"backend.example.com", "alt.example.com"}}
		if diff := cmp.Diff(want, r.Clusters[0].Cluster.UpstreamValidation); diff != "" {
			t.Errorf("validation (-want +got):\n%s", diff)
		}
	})
	t.Run("validation with subjectName only, h2", func(t *testing.T) {
		r, _ := onlyRoute(t, caSecret("team", "ca"), policyRoot(t, `{services: [{name: web, port: 80, protocol: h2, validation: {caSecret: ca, subjectName: backend.example.com}}]}`))
		if v := r.Clusters[0].Cluster.UpstreamValidation; v == nil || !cmp.Equal(v.SubjectNames, []string{"backend.example.com"}) {
			t.Errorf("validation = %+v", v)
		}
	})
	t.Run("delegated CA", func(t *testing.T) {
		r, _ := onlyRoute(t, caSecret("certs", "ca"), proxyDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: ca, targetNamespaces: [team]}]}}`),
			policyRoot(t, `{services: [{name: web, port: 80, protocol: tls, validation: {caSecret: certs/ca, subjectName: backend.example.com}}]}`))
		if v := r.Clusters[0].Cluster.UpstreamValidation; v == nil || v.CAName != "certs/ca" {
			t.Errorf("validation = %+v", v)
		}
	})
	for _, tc := range []struct {
		name, service, reason, part string
		objs                        []runtime.Object
	}{
		{"unknown protocol", `{name: web, port: 80, protocol: h3}`, "ProtocolInvalid", `spec.routes[0].services[0].protocol "h3" must be one of h2, h2c, tls`, nil},
		{"validation without TLS", `{name: web, port: 80, validation: {caSecret: ca, subjectName: b}}`, "ValidationInvalid", "validation needs protocol tls or h2", []runtime.Object{caSecret("team", "ca")}},
		{"validation over h2c", `{name: web, port: 80, protocol: h2c, validation: {caSecret: ca, subjectName: b}}`, "ValidationInvalid", "validation needs protocol tls or h2", []runtime.Object{caSecret("team", "ca")}},
		{"missing CA secret", `{name: web, port: 80, protocol: tls, validation: {caSecret: ca, subjectName: b}}`, "CASecretInvalid", "validation.caSecret: Secret team/ca not found", nil},
		{"CA secret without ca.crt", `{name: web, port: 80, protocol: tls, validation: {caSecret: cert, subjectName: b}}`, "CASecretInvalid", `Secret team/cert has no "ca.crt"`, []runtime.Object{tlsSecret("team", "cert", ca.CertPEM, ca.KeyPEM)}},
		{"CA not delegated", `{name: web, port: 80, protocol: tls, validation: {caSecret: certs/ca, subjectName: b}}`, "CASecretNotDelegated", "namespace certs does not delegate Secret ca to namespace team", []runtime.Object{caSecret("certs", "ca")}},
		{"no subject name", `{name: web, port: 80, protocol: tls, validation: {caSecret: ca}}`, "ValidationInvalid", "validation.subjectName is required", []runtime.Object{caSecret("team", "ca")}},
		{"subjectNames not starting with subjectName", `{name: web, port: 80, protocol: tls, validation: {caSecret: ca, subjectName: a, subjectNames: [b, a]}}`, "ValidationInvalid", `validation.subjectNames[0] "b" must equal subjectName "a"`, []runtime.Object{caSecret("team", "ca")}},
		{"no CA secret", `{name: web, port: 80, protocol: tls, validation: {subjectName: b}}`, "ValidationInvalid", "validation.caSecret is required", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			invalidRoute(t, problemService, tc.reason, []string{tc.part}, append(tc.objs, policyRoot(t, `{services: [`+tc.service+`]}`))...)
		})
	}
}

// Routes to one Service port with different cluster policies get different clusters;
// the same policy shares one; the default policy keeps the plain name.
func TestHTTPProxyClusterPolicies(t *testing.T) {
	g := build(
		policyRoot(t,
			`{conditions: [{prefix: /a}], services: [{name: web, port: 80}]}`,
			`{conditions: [{prefix: /b}], services: [{name: web, port: 80}], loadBalancerPolicy: {strategy: RoundRobin}}`,
			`{conditions: [{prefix: /c}], services: [{name: web, port: 80}], loadBalancerPolicy: {strategy: Random}}`,
			`{conditions: [{prefix: /d}], services: [{name: web, port: 80}], loadBalancerPolicy: {strategy: Random}, timeoutPolicy: {response: 1s}}`,
			`{conditions: [{prefix: /e}], services: [{name: web, port: 80, protocol: h2c}]}`,
			`{conditions: [{prefix: /f}], services: [{name: web, port: 80}], failurePolicy: {}}`,
			`{conditions: [{prefix: /g}], services: [{name: web, port: 80}], failurePolicy: {consecutive5xx: 2}}`,
			`{conditions: [{prefix: /h}], services: [{name: web, port: 80}], healthCheckPolicy: {path: /hz}}`,
			`{conditions: [{prefix: /i}], services: [{name: web, port: 80}], healthCheckPolicy: {path: /hz, expectedStatuses: [{start: 200, end: 400}]}}`,
			`{conditions: [{prefix: /j}], services: [{name: web, port: 80}], timeoutPolicy: {idleConnection: 10s}}`,
			`{conditions: [{prefix: /k}], services: [{name: web, port: 80}], loadBalancerPolicy: {strategy: Cookie}}`,
			`{conditions: [{prefix: /l}], services: [{name: web, port: 80}], loadBalancerPolicy: {strategy: RequestHash, requestHashPolicies: [{hashSourceIP: true}]}}`,
		),
		svc("team", "web", ":80"),
	)
	wantProxy(t, g, "team", "root", StatusValid)
	names := map[string]*Cluster{}
	for _, r := range routesOfHost(t, g, "p.example.com") {
		names[r.Path.Value] = r.Clusters[0].Cluster
	}
	if n := names["/a"].Name; n != "team/web/80" {
		t.Errorf("default policy cluster = %s, want team/web/80", n)
	}
	same := [][2]string{{"/a", "/b"}, {"/c", "/d"}, {"/k", "/l"}}
	for _, p := range same {
		if names[p[0]] != names[p[1]] {
			t.Errorf("%s and %s have the same cluster policy but clusters %s and %s", p[0], p[1], names[p[0]].Name, names[p[1]].Name)
		}
	}
	distinct := []string{"/a", "/c", "/e", "/f", "/g", "/h", "/i", "/j", "/k"}
	seen := map[string]string{}
	for _, p := range distinct {
		c := names[p]
		if !strings.HasPrefix(c.Name, "team/web/80") {
			t.Errorf("%s: cluster %s is not named after its service port", p, c.Name)
		}
		if prev, ok := seen[c.Name]; ok {
			t.Errorf("%s and %s have different policies but share cluster %s", prev, p, c.Name)
		}
		seen[c.Name] = p
	}
	if len(g.Clusters()) != len(distinct) {
		t.Errorf("%d clusters, want %d", len(g.Clusters()), len(distinct))
	}
}
