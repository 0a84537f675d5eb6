package dag

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/testutil"
)

// rootWithRoute is a root on c.example.com with one route to default/web:80 under the
// conditions written as a YAML flow list.
func rootWithRoute(t testing.TB, conds string) *contourv1.HTTPProxy {
	return proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: c.example.com}
  routes:
  - conditions: `+conds+`
    services: [{name: web, port: 80}]
`)
}

// Each path condition becomes the graph match a user expects: a prefix matches by path
// segments unless it ends in "/", exact matches one path, a regex the whole path; without
// a path condition a route matches every path.
func TestHTTPProxyPathConditions(t *testing.T) {
	for _, tc := range []struct {
		conds          string
		route          string
		match, nomatch []string
	}{
		{`[{prefix: /api}]`, "Prefix /api", []string{"/api", "/api/", "/api/v1"}, []string{"/apix", "/ap", "/", "/x/api"}},
		{`[{prefix: /api/}]`, "StringPrefix /api/", []string{"/api/", "/api/v1"}, []string{"/api", "/apix"}},
		{`[{prefix: /}]`, "Prefix /", []string{"/", "/anything", "/a/b"}, nil},
		{`[]`, "Prefix /", []string{"/", "/anything"}, nil},
		{`[{header: {name: x-a, present: true}}]`, "Prefix / h:x-a?", []string{"/", "/deep/path"}, nil},
		{`[{exact: /api}]`, "Exact /api", []string{"/api"}, []string{"/api/", "/api/v1", "/apix"}},
		{`[{regex: "/api/v[0-9]+"}]`, "Regex /api/v[0-9]+", []string{"/api/v1", "/api/v22"}, []string{"/api/v", "/api/v1/x", "/x/api/v1"}},
		{`[{regex: "/a|/b"}]`, "Regex /a|/b", []string{"/a", "/b"}, []string{"/c", "/ab"}},
	} {
		t.Run(tc.conds, func(t *testing.T) {
			g := build(rootWithRoute(t, tc.conds), svc("default", "web", ":80"))
			wantClean(t, g, "default", "root")
			if diff := cmp.Diff([]string{tc.route + " -> default/web/80"}, proxyHTTP(g, "c.example.com")); diff != "" {
				t.Fatalf("routes (-want +got):\n%s", diff)
			}
			routes := routesOfHost(t, g, "c.example.com")
			for _, p := range tc.match {
				checkServed(t, routes, expectation{req(p, "x-a: 1"), "web"})
			}
			for _, p := range tc.nomatch {
				checkServed(t, routes, expectation{req(p, "x-a: 1"), "none"})
			}
		})
	}
}

// A condition list that cannot be served makes the whole object invalid, naming the
// field and what is wrong.
func TestHTTPProxyInvalidConditions(t *testing.T) {
	for _, tc := range []struct {
		name, conds string
		parts       []string
	}{
		{"prefix without slash", `[{prefix: api}]`, []string{`spec.routes[0].conditions[0].prefix "api" must start with "/"`}},
		{"exact without slash", `[{exact: api}]`, []string{`spec.routes[0].conditions[0].exact "api" must start with "/"`}},
		{"regex without slash", `[{regex: "api.*"}]`, []string{`spec.routes[0].conditions[0].regex "api.*" must start with "/"`}},
		{"regex that is not RE2", `[{regex: "/(a"}]`, []string{`spec.routes[0].conditions[0].regex`, `is not a valid RE2 regular expression`, "missing closing )"}},
		{"regex lookahead", `[{regex: "/(?=a)"}]`, []string{"is not a valid RE2 regular expression"}},
		{"regex too complex", `[{regex: "/[a-z]{200}"}]`, []string{"is too complex", "at most 100"}},
		{"regex too complex by alternation", `[{regex: "/(aaaa|bbbb|cccc|dddd|eeee|ffff|gggg|hhhh|iiii|jjjj|kkkk|llll|mmmm|nnnn|oooo|pppp|qqqq|rrrr|ssss|tttt|uuuu|vvvv)"}]`, []string{"is too complex"}},
		{"two path conditions", `[{prefix: /a}, {exact: /a/b}]`, []string{"at most one path condition (prefix, exact or regex) per list; it has 2"}},
		{"two prefixes", `[{prefix: /a}, {prefix: /b}]`, []string{"at most one path condition"}},
		{"two kinds in one entry", `[{prefix: /a, header: {name: x, present: true}}]`, []string{"spec.routes[0].conditions[0] must set exactly one of prefix, exact, regex, header, queryParameter, cookie, userAgent (it sets 2)"}},
		{"empty entry", `[{}]`, []string{"(it sets 0)"}},
		{"header with two operators", `[{header: {name: x-a, exact: a, contains: b}}]`, []string{`spec.routes[0].conditions[0].header: header "x-a" must set exactly one of present, notpresent, exact, notexact, contains, notcontains, regex (it sets 2)`}},
		{"header present and notpresent", `[{header: {name: x-a, present: true, notpresent: true}}]`, []string{"(it sets 2)"}},
		{"header without operator", `[{header: {name: x-a}}]`, []string{"(it sets 0)"}},
		{"header name not a token", `[{header: {name: "x a", present: true}}]`, []string{`name "x a" is not a valid header name`}},
		{"header pseudo-header", `[{header: {name: ":authority", present: true}}]`, []string{`name ":authority" is not a valid header name`}},
		{"header regex not RE2", `[{header: {name: x-a, regex: "(a"}}]`, []string{"header: regex", "is not a valid RE2"}},
		{"header regex too complex", `[{header: {name: x-a, regex: "a{500}"}}]`, []string{"header: regex", "is too complex"}},
		{"header treatMissingAsEmpty with present", `[{header: {name: x-a, present: true, treatMissingAsEmpty: true}}]`, []string{"treatMissingAsEmpty has no meaning with present"}},
		{"query without name", `[{queryParameter: {exact: a}}]`, []string{"queryParameter: name is required"}},
		{"query with two operators", `[{queryParameter: {name: q, exact: a, prefix: b}}]`, []string{`query parameter "q" must set exactly one of present, exact, prefix, suffix, contains, regex (it sets 2)`}},
		{"query regex not RE2", `[{queryParameter: {name: q, regex: "[a"}}]`, []string{"queryParameter: regex", "is not a valid RE2"}},
		{"query ignoreCase with present", `[{queryParameter: {name: q, present: true, ignoreCase: true}}]`, []string{"ignoreCase has no meaning with present"}},
		{"cookie without value", `[{cookie: user}]`, []string{`cookie: "user" must be NAME=VALUE`}},
		{"cookie with bad name", `[{cookie: "us er=test"}]`, []string{"must be NAME=VALUE with a valid cookie name"}},
		{"cookie value with separator", `[{cookie: "user=a;b"}]`, []string{`value "a;b" may not contain`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(rootWithRoute(t, tc.conds), svc("default", "web", ":80"))
			wantInvalid(t, g, "default", "root", problemRoute, "InvalidCondition", tc.parts...)
			if http, https := hostNames(g); len(http)+len(https) != 0 {
				t.Errorf("an invalid root is served: %v %v", http, https)
			}
		})
	}
}

// Header conditions: every operator, with ignoreCase and treatMissingAsEmpty, as a
// request sees them.
func TestHTTPProxyHeaderConditions(t *testing.T) {
	for _, tc := range []struct {
		cond           string
		route          string
		match, nomatch [][]string // request headers
	}{
		{`{name: X-Beta, present: true}`, "h:x-beta?", [][]string{{"x-beta: "}, {"X-Beta: true"}}, [][]string{{}, {"x-other: 1"}}},
		{`{name: x-beta, notpresent: true}`, "h:x-beta!?", [][]string{{}, {"x-other: 1"}}, [][]string{{"x-beta: true"}}},
		{`{name: x-beta, exact: "true"}`, "h:x-beta=true", [][]string{{"x-beta: true"}}, [][]string{{"x-beta: TRUE"}, {"x-beta: truer"}, {}}},
		{`{name: x-beta, exact: "true", ignoreCase: true}`, "h:x-beta=true/i", [][]string{{"x-beta: true"}, {"x-beta: TRUE"}}, [][]string{{"x-beta: truer"}}},
		{`{name: x-beta, notexact: "true"}`, "h:x-beta!=true", [][]string{{"x-beta: false"}, {}}, [][]string{{"x-beta: true"}}},
		{`{name: user-agent, contains: Chrome}`, "h:user-agent~Chrome", [][]string{{"user-agent: Mozilla/5.0 Chrome/74.0"}}, [][]string{{"user-agent: Firefox"}, {"user-agent: chrome"}}},
		{`{name: user-agent, notcontains: Chrome}`, "h:user-agent!~Chrome", [][]string{{"user-agent: Firefox"}}, [][]string{{"user-agent: Mozilla Chrome/74"}}},
		{`{name: apiversion, regex: "v2\\.[0-9]+"}`, `h:apiversion=~v2\.[0-9]+`, [][]string{{"apiversion: v2.1"}}, [][]string{{"apiversion: v2.1-beta"}, {"apiversion: xv2.1"}, {"apiversion: v2x1"}}},
		{`{name: user-agent, regex: "mozilla.*chrome/[0-9.]+.*", ignoreCase: true}`, "h:user-agent=~(?i)mozilla.*chrome/[0-9.]+.*", [][]string{{"user-agent: Mozilla/5.0 Chrome/74.0 Safari"}}, [][]string{{"user-agent: Mozilla Firefox"}}},
		{`{name: x-tenant, exact: "", notexact: org-a, treatMissingAsEmpty: true}`, "h:x-tenant!=org-a/e", [][]string{{}, {"x-tenant: org-b"}}, [][]string{{"x-tenant: org-a"}}},
		{`{name: x-tenant, contains: "", regex: "(org-a)?", treatMissingAsEmpty: true}`, "h:x-tenant=~(org-a)?/e", [][]string{{}, {"x-tenant: org-a"}}, [][]string{{"x-tenant: org-b"}}},
	} {
		t.Run(tc.cond, func(t *testing.T) {
			g := build(rootWithRoute(t, "[{header: "+tc.cond+"}]"), svc("default", "web", ":80"))
			wantClean(t, g, "default", "root")
			if diff := cmp.Diff([]string{"Prefix / " + tc.route + " -> default/web/80"}, proxyHTTP(g, "c.example.com")); diff != "" {
				t.Fatalf("routes (-want +got):\n%s", diff)
			}
			routes := routesOfHost(t, g, "c.example.com")
			for _, h := range tc.match {
				checkServed(t, routes, expectation{req("/", h...), "web"})
			}
			for _, h := range tc.nomatch {
				checkServed(t, routes, expectation{req("/", h...), "none"})
			}
		})
	}
}

func TestHTTPProxyQueryParameterConditions(t *testing.T) {
	for _, tc := range []struct {
		cond           string
		route          string
		match, nomatch []string // queries
	}{
		{`{name: debug, present: true}`, "q:debug?", []string{"debug", "debug=0", "a=1&debug=1"}, []string{"", "a=1"}},
		{`{name: v, exact: "2"}`, "q:v=2", []string{"v=2"}, []string{"v=20", "v=", ""}},
		{`{name: v, exact: beta, ignoreCase: true}`, "q:v=beta/i", []string{"v=BETA", "v=beta"}, []string{"v=betas"}},
		{`{name: v, prefix: be}`, "q:v^be", []string{"v=beta"}, []string{"v=alpha"}},
		{`{name: v, suffix: ta}`, "q:v$ta", []string{"v=beta"}, []string{"v=tax"}},
		{`{name: v, contains: et}`, "q:v~et", []string{"v=beta"}, []string{"v=bta"}},
		{`{name: v, regex: "[0-9]+"}`, "q:v=~[0-9]+", []string{"v=12"}, []string{"v=12a", "v=a12"}},
		{`{name: v, regex: "beta|rc", ignoreCase: true}`, "q:v=~(?i)beta|rc", []string{"v=BETA", "v=Rc"}, []string{"v=betas", "v=xrc"}},
	} {
		t.Run(tc.cond, func(t *testing.T) {
			g := build(rootWithRoute(t, "[{prefix: /q}, {queryParameter: "+tc.cond+"}]"), svc("default", "web", ":80"))
			wantClean(t, g, "default", "root")
			if diff := cmp.Diff([]string{"Prefix /q " + tc.route + " -> default/web/80"}, proxyHTTP(g, "c.example.com")); diff != "" {
				t.Fatalf("routes (-want +got):\n%s", diff)
			}
			routes := routesOfHost(t, g, "c.example.com")
			for _, q := range tc.match {
				checkServed(t, routes, expectation{req("/q?" + q), "web"})
			}
			for _, q := range tc.nomatch {
				checkServed(t, routes, expectation{req("/q?" + q), "none"})
			}
		})
	}
}

// Seed 004's cookie shorthand matches a cookie by name and whole value among the others
// of the Cookie header; userAgent is "contains" on User-Agent.
func TestHTTPProxyCookieAndUserAgentShorthands(t *testing.T) {
	g := build(rootWithRoute(t, `[{prefix: /foo}, {cookie: user=test}, {userAgent: Chrome}]`), svc("default", "web", ":80"))
	wantClean(t, g, "default", "root")
	routes := routesOfHost(t, g, "c.example.com")
	if len(routes) != 1 || len(routes[0].Headers) != 2 {
		t.Fatalf("routes = %v", proxyHTTP(g, "c.example.com"))
	}
	cookie, ua := routes[0].Headers[0], routes[0].Headers[1]
	if cookie.Name != "cookie" || cookie.Kind != MatchRegex || cookie.Invert {
		t.Errorf("cookie condition = %+v, want a regex on the cookie header", cookie)
	}
	if want := (HeaderMatch{Name: "user-agent", Kind: MatchContains, Value: "Chrome"}); ua != want {
		t.Errorf("userAgent condition = %+v, want %+v", ua, want)
	}
	re := mustFullRegex(t, cookie.Value)
	for _, h := range []string{"user=test", "a=b; user=test", "a=b;user=test", "user=test; a=b", "a=b; user=test; c=d", "a=b;  user=test  ;c=d"} {
		if !re.MatchString(h) {
			t.Errorf("cookie regex %q does not match %q", cookie.Value, h)
		}
	}
	for _, h := range []string{"", "xuser=test", "user=testy", "a=b; xuser=test", "user=tes", "user=test2; a=b", "a=user=test", "user_test", "USER=test"} {
		if re.MatchString(h) {
			t.Errorf("cookie regex %q matches %q", cookie.Value, h)
		}
	}
	checkServed(t, routes,
		expectation{req("/foo", "cookie: a=b; user=test", "user-agent: Mozilla Chrome/74"), "web"},
		expectation{req("/foo", "cookie: a=b; xuser=test", "user-agent: Mozilla Chrome/74"), "none"},
		expectation{req("/foo", "cookie: user=test", "user-agent: Firefox"), "none"},
	)

	// Cookie names and values are quoted: a "." in them is not "any character".
	g = build(rootWithRoute(t, `[{cookie: "a.b=c.d"}]`), svc("default", "web", ":80"))
	wantClean(t, g, "default", "root")
	re = mustFullRegex(t, routesOfHost(t, g, "c.example.com")[0].Headers[0].Value)
	if !re.MatchString("x=1; a.b=c.d") || re.MatchString("aXb=cXd") {
		t.Errorf("cookie regex %q does not quote the name and value", re)
	}
}

// parseConditions on its own: conditions of an include refuse exact and regex; the
// errors name the field.
func TestHTTPProxyParseConditions(t *testing.T) {
	c, errs := parseConditions("f", []contourv1.MatchCondition{{Prefix: "/a"}, {Header: &contourv1.HeaderMatchCondition{Name: "X-A", Exact: "1"}}, {QueryParameter: &contourv1.QueryParameterMatchCondition{Name: "q", Present: true}}}, false)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := conditions{path: PathMatch{Kind: PathPrefix, Value: "/a"}, hasPath: true,
		headers: []HeaderMatch{{Name: "x-a", Kind: MatchExact, Value: "1"}},
		query:   []QueryMatch{{Name: "q", Kind: MatchPresent}}}
	if diff := cmp.Diff(want, c, cmp.AllowUnexported(conditions{})); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	for _, mc := range []contourv1.MatchCondition{{Exact: "/a"}, {Regex: "/a"}} {
		if _, errs := parseConditions("spec.includes[0].conditions", []contourv1.MatchCondition{mc}, true); len(errs) != 1 || !strings.Contains(errs[0], "spec.includes[0].conditions[0]") || !strings.Contains(errs[0], "an include's conditions cannot use") {
			t.Errorf("include condition %+v: errors %q", mc, errs)
		}
	}
	if c, errs := parseConditions("f", nil, false); len(errs) > 0 || c.path != (PathMatch{Kind: PathPrefix, Value: "/"}) {
		t.Errorf("no conditions: %+v %v, want prefix /", c, errs)
	}
}

// Route precedence: exact paths, then regexes, then longer prefixes; among routes with
// the same path, more header conditions first, then more query conditions: the most
// specific route wins whatever the order they are written in.
func TestHTTPProxyRoutePrecedence(t *testing.T) {
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: c.example.com}
  routes:
  - {services: [{name: catchall, port: 80}]}
  - conditions: [{prefix: /api}, {queryParameter: {name: v, exact: "2"}}]
    services: [{name: api-q, port: 80}]
  - conditions: [{prefix: /api}]
    services: [{name: api, port: 80}]
  - conditions: [{prefix: /api}, {header: {name: x-a, present: true}}, {header: {name: x-b, present: true}}]
    services: [{name: api-hh, port: 80}]
  - conditions: [{prefix: /api}, {header: {name: x-a, present: true}}]
    services: [{name: api-h, port: 80}]
  - conditions: [{prefix: /api}, {header: {name: x-a, present: true}}, {queryParameter: {name: v, exact: "2"}}]
    services: [{name: api-hq, port: 80}]
  - conditions: [{prefix: /api/v1}]
    services: [{name: v1, port: 80}]
  - conditions: [{regex: "/api/.*"}]
    services: [{name: re, port: 80}]
  - conditions: [{exact: /api/v1/special}]
    services: [{name: exact, port: 80}]
`))
	wantProxy(t, g, "default", "root", StatusValid)
	want := []string{
		"Exact /api/v1/special -> default/exact/80",
		"Regex /api/.* -> default/re/80",
		"Prefix /api/v1 -> default/v1/80",
		"Prefix /api h:x-a? h:x-b? -> default/api-hh/80",
		"Prefix /api h:x-a? q:v=2 -> default/api-hq/80",
		"Prefix /api h:x-a? -> default/api-h/80",
		"Prefix /api q:v=2 -> default/api-q/80",
		"Prefix /api -> default/api/80",
		"Prefix / -> default/catchall/80",
	}
	if diff := cmp.Diff(want, proxyHTTP(g, "c.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// Seed 004, "Path Match with Headers": two routes on /foo with x-header a and b, and one
// without; its request list.
func TestHTTPProxySeed004PathMatchWithHeaders(t *testing.T) {
	// The route without headers comes first: the order written must not matter.
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: foo.example.com}
  routes:
  - conditions: [{prefix: /foo}]
    services: [{name: backend-default, port: 9999}]
  - conditions: [{prefix: /foo}, {header: {name: x-header, exact: a}}]
    services: [{name: backend-a, port: 9999}]
  - conditions: [{prefix: /foo}, {header: {name: x-header, exact: b}}]
    services: [{name: backend-b, port: 9999}]
`))
	wantProxy(t, g, "default", "root", StatusValid)
	checkServed(t, routesOfHost(t, g, "foo.example.com"),
		expectation{req("/foo", "x-header: a"), "backend-a"},
		expectation{req("/foo", "x-header: b"), "backend-b"},
		expectation{req("/foo"), "backend-default"},
		expectation{req("/foo", "x-header: c"), "backend-default"},
		expectation{req("/bar", "x-header: a"), "none"},
	)
}

// Seed 004, "Path Match with Headers (no path)": header routes match any path.
func TestHTTPProxySeed004HeadersWithoutPath(t *testing.T) {
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: foo.example.com}
  routes:
  - conditions: [{header: {name: x-header, exact: a}}]
    services: [{name: backend-a, port: 9999}]
  - conditions: [{header: {name: x-header, exact: b}}]
    services: [{name: backend-b, port: 9999}]
`))
	wantProxy(t, g, "default", "root", StatusValid)
	checkServed(t, routesOfHost(t, g, "foo.example.com"),
		expectation{req("/", "x-header: a"), "backend-a"},
		expectation{req("/any/path/at/all", "x-header: a"), "backend-a"},
		expectation{req("/x", "x-header: b"), "backend-b"},
		expectation{req("/x"), "none"},
	)
}

// Seed 004, "Path Match with Cookie".
func TestHTTPProxySeed004PathMatchWithCookie(t *testing.T) {
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: foo.example.com}
  routes:
  - conditions: [{prefix: /foo}, {cookie: user=test}]
    services: [{name: cookiebackend, port: 80}]
  - conditions: [{prefix: /}]
    services: [{name: web, port: 80}]
`))
	wantProxy(t, g, "default", "root", StatusValid)
	checkServed(t, routesOfHost(t, g, "foo.example.com"),
		expectation{req("/foo", "cookie: user=test"), "cookiebackend"},
		expectation{req("/foo/x", "cookie: session=1; user=test"), "cookiebackend"},
		expectation{req("/foo", "cookie: user=tester"), "web"},
		expectation{req("/foo", "cookie: xuser=test"), "web"},
		expectation{req("/foo"), "web"},
	)
}

// Seed 004, "Header Delegation": requests on /foo with x-header a go to team-a, with b
// (and a Chrome user agent) to team-b, the rest to the root's own backend. Both teams'
// backends resolve in their own namespaces. The seed's request list leaves out the user
// agent its example asks team-b's requests to carry; without it they go to the default.
func TestHTTPProxySeed004HeaderDelegation(t *testing.T) {
	g := build(
		proxy(t, `
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: foo.example.com}
  includes:
  - name: headera-ir
    namespace: team-a
    conditions: [{prefix: /foo}, {header: {name: x-header, exact: a}}]
  - name: headerb-ir
    namespace: team-b
    conditions: [{prefix: /foo}, {header: {name: x-header, exact: b}}, {userAgent: Chrome}]
  routes:
  - conditions: [{prefix: /foo}]
    services: [{name: backend-default, port: 9999}]
`),
		proxy(t, `{metadata: {name: headera-ir, namespace: team-a}, spec: {routes: [{services: [{name: backend-a, port: 9999}]}]}}`),
		proxy(t, `{metadata: {name: headerb-ir, namespace: team-b}, spec: {routes: [{services: [{name: backend-b, port: 9999}]}]}}`),
		svc("default", "backend-default", ":9999"), svc("team-a", "backend-a", ":9999"), svc("team-b", "backend-b", ":9999"),
		// Same-named Services elsewhere are never used.
		svc("default", "backend-a", ":9999"), svc("default", "backend-b", ":9999"),
	)
	wantClean(t, g, "default", "root")
	wantProxy(t, g, "team-a", "headera-ir", StatusValid, `included by HTTPProxy default/root on foo.example.com (prefix "/foo", header x-header exact "a")`)
	wantProxy(t, g, "team-b", "headerb-ir", StatusValid, `included by HTTPProxy default/root on foo.example.com`)
	want := []string{
		"Prefix /foo h:x-header=b h:user-agent~Chrome -> team-b/backend-b/9999",
		"Prefix /foo h:x-header=a -> team-a/backend-a/9999",
		"Prefix /foo -> default/backend-default/9999",
	}
	if diff := cmp.Diff(want, proxyHTTP(g, "foo.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	checkServed(t, routesOfHost(t, g, "foo.example.com"),
		expectation{req("/foo", "x-header: a"), "team-a/backend-a"},
		expectation{req("/foo", "x-header: b", "user-agent: Mozilla/5.0 Chrome/74.0.3729.169"), "team-b/backend-b"},
		expectation{req("/foo", "x-header: b"), "backend-default"},
		expectation{req("/foo"), "backend-default"},
	)
}

// The seed's use cases: a platform routed by user agent to two teams, a beta opt-in by
// header on /weather, and tenants routed by header to their own namespaces, each team
// free to add its own routes under what it was given.
func TestHTTPProxySeed004MultiTeamUseCases(t *testing.T) {
	g := build(
		proxy(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: app.example.com}
  includes:
  - {name: ios, namespace: team-ios, conditions: [{userAgent: iPhone}]}
  - {name: android, namespace: team-android, conditions: [{userAgent: Android}]}
  - {name: weather-beta, namespace: weather, conditions: [{prefix: /weather}, {header: {name: X-Beta, exact: "true"}}]}
  - {name: weather, namespace: weather, conditions: [{prefix: /weather}]}
  - {name: org, namespace: org-a, conditions: [{prefix: /data}, {header: {name: x-org, exact: OrgA}}]}
  - {name: org, namespace: org-b, conditions: [{prefix: /data}, {header: {name: x-org, exact: OrgB}}]}
  routes:
  - {services: [{name: web, port: 80}]}
`),
		proxy(t, `{metadata: {name: ios, namespace: team-ios}, spec: {routes: [{services: [{name: backend-ios, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: android, namespace: team-android}, spec: {routes: [{services: [{name: backend-android, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: weather-beta, namespace: weather}, spec: {routes: [{services: [{name: backend-beta, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: weather, namespace: weather}, spec: {routes: [{services: [{name: backend-prod, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: org, namespace: org-a}, spec: {routes: [{services: [{name: data, port: 80}]}, {conditions: [{prefix: /reports}], services: [{name: reports, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: org, namespace: org-b}, spec: {routes: [{services: [{name: data, port: 80}]}]}}`),
	)
	for _, s := range g.Statuses {
		if s.Status != StatusValid {
			t.Errorf("%s: %s %q", s.Object, s.Status, s.Description)
		}
	}
	checkServed(t, routesOfHost(t, g, "app.example.com"),
		expectation{req("/", "user-agent: Mozilla (iPhone; CPU iPhone OS 12_2)"), "team-ios/backend-ios"},
		expectation{req("/x", "user-agent: Mozilla (Linux; Android 9)"), "team-android/backend-android"},
		expectation{req("/", "user-agent: curl"), "infra/web"},
		expectation{req("/weather", "x-beta: true"), "weather/backend-beta"},
		expectation{req("/weather/today"), "weather/backend-prod"},
		expectation{req("/weather", "x-beta: false"), "weather/backend-prod"},
		expectation{req("/data", "x-org: OrgA"), "org-a/data"},
		expectation{req("/data/reports/1", "x-org: OrgA"), "org-a/reports"},
		expectation{req("/data/reports/1", "x-org: OrgB"), "org-b/data"},
		expectation{req("/data"), "infra/web"},
	)
}

// TLS: the certificate is a Secret of the root's namespace, or of another namespace
// that delegates it with a TLSCertificateDelegation of either API group; HTTP requests
// are redirected to HTTPS.
func TestHTTPProxyTLS(t *testing.T) {
	cert := testutil.SelfSigned("secure.example.com")
	web := svc("infra", "web", ":80")
	root := func(secret, extra string) *contourv1.HTTPProxy {
		return proxy(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: secure.example.com, tls: {secretName: `+secret+extra+`}}
  routes: [{services: [{name: web, port: 80}]}]
`)
	}
	wantServed := func(t *testing.T, g *Graph, secret string) *SecureVirtualHost {
		t.Helper()
		wantClean(t, g, "infra", "root")
		svh := httpsHost(g, "secure.example.com")
		if svh == nil || svh.Secret == nil || svh.Secret.Name != secret {
			t.Fatalf("secure virtual host = %+v, want one with Secret %s", svh, secret)
		}
		if diff := cmp.Diff([]string{"Prefix / -> infra/web/80"}, proxyHTTPS(g, "secure.example.com")); diff != "" {
			t.Errorf("HTTPS routes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"Prefix / -> https"}, proxyHTTP(g, "secure.example.com")); diff != "" {
			t.Errorf("HTTP routes (-want +got):\n%s", diff)
		}
		return svh
	}
	t.Run("own namespace", func(t *testing.T) {
		svh := wantServed(t, build(root("cert", ""), tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM), web), "infra/cert")
		if svh.MinTLSVersion != "1.2" || svh.MaxTLSVersion != "" || svh.Passthrough || svh.TCPProxy != nil {
			t.Errorf("secure virtual host = %+v, want TLS 1.2 and up, no passthrough", svh)
		}
	})
	t.Run("own namespace written out", func(t *testing.T) {
		wantServed(t, build(root("infra/cert", ""), tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM), web), "infra/cert")
	})
	t.Run("protocol versions", func(t *testing.T) {
		svh := wantServed(t, build(root("cert", ", minimumProtocolVersion: '1.3', maximumProtocolVersion: '1.3'"), tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM), web), "infra/cert")
		if svh.MinTLSVersion != "1.3" || svh.MaxTLSVersion != "1.3" {
			t.Errorf("versions = %s-%s, want 1.3-1.3", svh.MinTLSVersion, svh.MaxTLSVersion)
		}
	})
	for _, v := range []string{"minimumProtocolVersion: '1.1'", "maximumProtocolVersion: '1.4'", "minimumProtocolVersion: '1.3', maximumProtocolVersion: '1.2'"} {
		t.Run(v, func(t *testing.T) {
			g := build(root("cert", ", "+v), tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM), web)
			wantInvalid(t, g, "infra", "root", problemTLS, "TLSVersionInvalid")
		})
	}
	secret := tlsSecret("certs", "wild", cert.CertPEM, cert.KeyPEM)
	t.Run("delegated by contour.heptio.com/v1beta1", func(t *testing.T) {
		wantServed(t, build(root("certs/wild", ""), secret, web, certDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: wild, targetNamespaces: [infra]}]}}`)), "certs/wild")
	})
	t.Run("delegated by projectcontour.io/v1", func(t *testing.T) {
		wantServed(t, build(root("certs/wild", ""), secret, web, proxyDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: wild, targetNamespaces: ["*"]}]}}`)), "certs/wild")
	})
	for name, objs := range map[string][]runtime.Object{
		"not delegated":                  {secret},
		"delegated to another namespace": {secret, proxyDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: wild, targetNamespaces: [other]}]}}`)},
		"another secret delegated":       {secret, certDelegation(t, `{metadata: {name: d, namespace: certs}, spec: {delegations: [{secretName: other, targetNamespaces: [infra]}]}}`)},
		"delegated from elsewhere":       {secret, proxyDelegation(t, `{metadata: {name: d, namespace: infra}, spec: {delegations: [{secretName: wild, targetNamespaces: [infra]}]}}`)},
	} {
		t.Run(name, func(t *testing.T) {
			g := build(append(objs, root("certs/wild", ""))...)
			wantInvalid(t, g, "infra", "root", problemTLS, "DelegationNotPermitted", `namespace certs does not delegate Secret wild to namespace infra`)
			if http, https := hostNames(g); len(http)+len(https) > 0 {
				t.Errorf("hosts served without their certificate: %v %v", http, https)
			}
		})
	}
	t.Run("missing secret", func(t *testing.T) {
		g := build(root("cert", ""))
		wantInvalid(t, g, "infra", "root", problemTLS, "SecretNotValid", "Secret infra/cert not found")
		if http, https := hostNames(g); len(http)+len(https) > 0 {
			t.Errorf("hosts served without their certificate: %v %v", http, https)
		}
	})
	t.Run("no secret name", func(t *testing.T) {
		g := build(proxy(t, `{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: secure.example.com, tls: {}}, routes: [{services: [{name: web, port: 80}]}]}}`))
		wantInvalid(t, g, "infra", "root", problemTLS, "TLSConfigInvalid", "needs secretName")
	})
}

// A root's own permitInsecure route is served over HTTP; its other routes redirect.
func TestHTTPProxyRootPermitInsecure(t *testing.T) {
	cert := testutil.SelfSigned("secure.example.com")
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: secure.example.com, tls: {secretName: cert}}
  routes:
  - {services: [{name: web, port: 80}]}
  - {conditions: [{prefix: /.well-known/acme-challenge}], services: [{name: acme, port: 80}], permitInsecure: true}
`), tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM), svc("default", "web", ":80"), svc("default", "acme", ":80"))
	wantClean(t, g, "default", "root")
	if diff := cmp.Diff([]string{"Prefix /.well-known/acme-challenge -> default/acme/80", "Prefix / -> https"}, proxyHTTP(g, "secure.example.com")); diff != "" {
		t.Errorf("HTTP routes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Prefix /.well-known/acme-challenge -> default/acme/80", "Prefix / -> default/web/80"}, proxyHTTPS(g, "secure.example.com")); diff != "" {
		t.Errorf("HTTPS routes (-want +got):\n%s", diff)
	}
}

// TCP proxying: passthrough sends the TLS connection undecrypted, by SNI; termination
// decrypts first; either may take its services from an included object's tcpproxy.
func TestHTTPProxyTCPProxy(t *testing.T) {
	cert := testutil.SelfSigned("tcp.example.com")
	secret := tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM)
	t.Run("passthrough", func(t *testing.T) {
		g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}
  tcpproxy: {services: [{name: db, port: 5432}]}
`), svc("default", "db", ":5432"))
		wantClean(t, g, "default", "root")
		svh := httpsHost(g, "tcp.example.com")
		if svh == nil || !svh.Passthrough || svh.Secret != nil || svh.TCPProxy == nil || len(svh.Routes) != 0 {
			t.Fatalf("secure virtual host = %+v, want passthrough with a TCP proxy and no secret", svh)
		}
		if got := svh.TCPProxy.Clusters; len(got) != 1 || got[0].Cluster.Name != "default/db/5432" || svh.TCPProxy.Source.Name != "root" {
			t.Errorf("TCP proxy = %+v", svh.TCPProxy)
		}
		if http, _ := hostNames(g); len(http) != 0 {
			t.Errorf("a TCP-only host is on the HTTP listener: %v", http)
		}
	})
	t.Run("termination", func(t *testing.T) {
		g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: tcp.example.com, tls: {secretName: cert}}
  tcpproxy:
    loadBalancerPolicy: {strategy: Random}
    healthCheckPolicy: {intervalSeconds: 3}
    services: [{name: db, port: 5432, weight: 3}, {name: db2, port: 5432, weight: 1}]
`), secret)
		wantProxy(t, g, "default", "root", StatusValid)
		svh := httpsHost(g, "tcp.example.com")
		if svh == nil || svh.Passthrough || svh.Secret == nil || svh.TCPProxy == nil || len(svh.Routes) != 0 {
			t.Fatalf("secure virtual host = %+v, want TLS termination to a TCP proxy", svh)
		}
		tp := svh.TCPProxy
		if len(tp.Clusters) != 2 || tp.Clusters[0].Weight != 3 || tp.Clusters[1].Weight != 1 {
			t.Fatalf("TCP clusters = %+v", tp.Clusters)
		}
		c := tp.Clusters[0].Cluster
		if c.LoadBalancer != LBRandom || c.HealthCheck == nil || !c.HealthCheck.TCP || c.HealthCheck.Interval != 3*time.Second {
			t.Errorf("TCP cluster = %+v, want Random with a TCP health check every 3s", c)
		}
	})
	t.Run("include", func(t *testing.T) {
		g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}
  tcpproxy: {include: {name: db, namespace: data}}
`), proxy(t, `
metadata: {name: db, namespace: data}
spec:
  tcpproxy: {services: [{name: postgres, port: 5432}]}
`))
		wantClean(t, g, "default", "root")
		st := wantProxy(t, g, "data", "db", StatusValid, "tcpproxy included by HTTPProxy default/root on tcp.example.com")
		if !cmp.Equal(st.Hosts, []string{"tcp.example.com"}) {
			t.Errorf("included object hosts = %v", st.Hosts)
		}
		svh := httpsHost(g, "tcp.example.com")
		if svh == nil || svh.TCPProxy == nil || svh.TCPProxy.Clusters[0].Cluster.Name != "data/postgres/5432" || svh.TCPProxy.Source.Name != "db" {
			t.Fatalf("secure virtual host = %+v", svh)
		}
	})
	t.Run("include by its old name", func(t *testing.T) {
		g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}
  tcpproxy: {includes: {name: db}}
`), proxy(t, `{metadata: {name: db}, spec: {tcpproxy: {services: [{name: postgres, port: 5432}]}}}`))
		wantClean(t, g, "default", "root")
		if svh := httpsHost(g, "tcp.example.com"); svh == nil || svh.TCPProxy == nil {
			t.Fatalf("secure virtual host = %+v", svh)
		}
	})
	for _, tc := range []struct {
		name, root string
		others     []string
		typ, why   string
		parts      []string
	}{
		{"without TLS", `{virtualhost: {fqdn: tcp.example.com}, tcpproxy: {services: [{name: db, port: 5432}]}}`, nil, problemTCPProxy, "TLSMustBeConfigured", []string{"spec.tcpproxy needs spec.virtualhost.tls"}},
		{"passthrough without tcpproxy", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, routes: [{services: [{name: web, port: 80}]}]}`, nil, problemTLS, "TLSConfigInvalid", []string{"passthrough needs spec.tcpproxy"}},
		{"passthrough and secret", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true, secretName: cert}}, tcpproxy: {services: [{name: db, port: 5432}]}}`, nil, problemTLS, "TLSConfigInvalid", []string{"passthrough and secretName are exclusive"}},
		{"empty tcpproxy", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {}}`, nil, problemTCPProxy, "NothingDefined", []string{"spec.tcpproxy needs services or include"}},
		{"services and include", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {services: [{name: db, port: 5432}], include: {name: db}}}`, []string{`{metadata: {name: db}, spec: {tcpproxy: {services: [{name: postgres, port: 5432}]}}}`}, problemTCPProxy, "NoServicesAndInclude", []string{"services and include are exclusive"}},
		{"protocol on a TCP service", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {services: [{name: db, port: 5432, protocol: h2}]}}`, nil, problemTCPProxy, "ProtocolInvalid", []string{"spec.tcpproxy.services[0].protocol"}},
		{"hashing strategy", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {loadBalancerPolicy: {strategy: Cookie}, services: [{name: db, port: 5432}]}}`, nil, problemTCPProxy, "LoadBalancerStrategyInvalid", []string{"Cookie and RequestHash need HTTP requests"}},
		{"include of a missing object", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {include: {name: nope}}}`, nil, problemTCPProxy, "IncludeNotFound", []string{"spec.tcpproxy.include default/nope does not exist"}},
		{"include of an object without tcpproxy", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {include: {name: web}}}`, []string{`{metadata: {name: web}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`}, problemTCPProxy, "IncludeNotFound", []string{"default/web has no spec.tcpproxy.services"}},
		{"include of a root", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {include: {name: other}}}`, []string{`{metadata: {name: other}, spec: {virtualhost: {fqdn: other.example.com, tls: {passthrough: true}}, tcpproxy: {services: [{name: db, port: 5432}]}}}`}, problemTCPProxy, "IncludeNotFound", []string{"is a root"}},
		{"only mirrors", `{virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}, tcpproxy: {services: [{name: db, port: 5432, mirror: true}]}}`, nil, problemService, "NoServices", []string{"spec.tcpproxy.services: every service is a mirror"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{proxy(t, `{metadata: {name: root}, spec: `+tc.root+`}`), secret}
			for _, o := range tc.others {
				objs = append(objs, proxy(t, o))
			}
			g := build(objs...)
			wantInvalid(t, g, "default", "root", tc.typ, tc.why, tc.parts...)
			if svh := httpsHost(g, "tcp.example.com"); svh != nil {
				t.Errorf("an invalid root is served: %+v", svh)
			}
		})
	}
	t.Run("included tcpproxy without a root", func(t *testing.T) {
		g := build(proxy(t, `{metadata: {name: db}, spec: {tcpproxy: {services: [{name: postgres, port: 5432}]}}}`))
		wantProxy(t, g, "default", "db", StatusOrphaned)
	})
	t.Run("service fields Portico ignores warn, as on routes", func(t *testing.T) {
		// Headers policies mean nothing to a TCP proxy: ignored (even one that would be
		// invalid on a route), with a warning.
		g := build(proxy(t, `
metadata: {name: db, namespace: data}
spec:
  tcpproxy:
    services:
    - name: postgres
      port: 5432
      healthPort: 8080
      slowStartPolicy: {window: 10s}
      cookieRewritePolicies: [{name: c, secure: true}]
      requestHeadersPolicy: {set: [{name: Host, value: "%REQ(x)%"}]}
      responseHeadersPolicy: {remove: [server]}
    - {name: shadow, port: 5432, mirror: true}
`), proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: tcp.example.com, tls: {passthrough: true}}
  tcpproxy: {include: {name: db, namespace: data}}
`))
		wantClean(t, g, "default", "root")
		st := wantProxy(t, g, "data", "db", StatusValid)
		for _, w := range []string{
			"spec.tcpproxy.services[0].cookieRewritePolicies has no meaning on a tcpproxy",
			"spec.tcpproxy.services[0].requestHeadersPolicy is ignored: a TCP proxy forwards bytes",
			"spec.tcpproxy.services[0].responseHeadersPolicy is ignored",
			"spec.tcpproxy.services[1].mirror has no meaning on a tcpproxy (a connection cannot be copied): shadow receives no traffic",
		} {
			wantProblem(t, "data/db warnings", st.Warnings, problemUnsupported, "NotImplemented", w)
		}
		svh := httpsHost(g, "tcp.example.com")
		if svh == nil || svh.TCPProxy == nil {
			t.Fatalf("secure virtual host = %+v", svh)
		}
		if got := svh.TCPProxy.Clusters; len(got) != 1 || !strings.HasPrefix(got[0].Cluster.Name, "data/postgres/5432/") || got[0].Cluster.SlowStart == nil || got[0].RequestHeaders != nil || got[0].ResponseHeaders != nil {
			t.Errorf("TCP clusters = %+v, want postgres alone, without headers policies", got)
		}
	})
}

// Host names: a wildcard stands for one whole first label; anything else with "*" or
// that is not a DNS name is invalid.
func TestHTTPProxyFQDN(t *testing.T) {
	for fqdn, want := range map[string]string{
		"*.example.com":     "",
		"Foo.Example.com":   "",
		"foo.*.com":         `a wildcard must be the whole first label`,
		"*foo.example.com":  `a wildcard must be the whole first label`,
		"*.*.example.com":   `a wildcard must be the whole first label`,
		"*.":                `a wildcard must be the whole first label`,
		"*":                 `a wildcard must be the whole first label`,
		"foo_bar.com":       "is not a valid host name",
		"":                  "required on a root",
		"-leading.dash.com": "is not a valid host name",
	} {
		t.Run(fqdn, func(t *testing.T) {
			g := build(proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: "`+fqdn+`"}, routes: [{services: [{name: web, port: 80}]}]}}`), svc("default", "web", ":80"))
			if want == "" {
				wantClean(t, g, "default", "root")
				if vh := httpHost(g, strings.ToLower(fqdn)); vh == nil || len(vh.Routes) != 1 {
					t.Errorf("host %s not served: %v", fqdn, g.HTTP)
				}
				return
			}
			s := wantInvalid(t, g, "default", "root", problemVirtualHost, "FQDNInvalid", want)
			if strings.Contains(s.Description, "IngressRoute") {
				t.Errorf("an HTTPProxy's message speaks of IngressRoutes: %q", s.Description)
			}
		})
	}
}

// Host ownership is one rule across HTTPProxy roots, IngressRoute roots and Ingresses:
// the oldest keeps the host (between an Ingress and a root of the same age, the root);
// roots of the same age all lose it; an invalid root still holds its host.
func TestHTTPProxyHostOwnershipAcrossKinds(t *testing.T) {
	const (
		older = "2020-01-01T00:00:00Z"
		newer = "2021-01-01T00:00:00Z"
	)
	hp := func(name, created, extra string) runtime.Object {
		return proxy(t, `{metadata: {name: `+name+`, namespace: hp, creationTimestamp: "`+created+`"}, spec: {virtualhost: {fqdn: shop.example.com}, routes: [{services: [{name: hp, port: 80`+extra+`}]}]}}`)
	}
	irt := func(name, created string) runtime.Object {
		return ir(t, `{metadata: {name: `+name+`, namespace: ir, creationTimestamp: "`+created+`"}, spec: {virtualhost: {fqdn: shop.example.com}, routes: [{match: /, services: [{name: ir, port: 80}]}]}}`)
	}
	ingress := func(created string) runtime.Object {
		return ing(t, `
metadata: {name: web, namespace: ing, creationTimestamp: "`+created+`"}
spec:
  rules: [{host: shop.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: ing, port: {number: 80}}}}]}}]
`)
	}
	serving := func(t *testing.T, g *Graph) string {
		t.Helper()
		vh := httpHost(g, "shop.example.com")
		if vh == nil {
			return "nobody"
		}
		return vh.Routes[0].Source.String()
	}

	t.Run("older HTTPProxy keeps the host from a newer IngressRoute", func(t *testing.T) {
		g := build(hp("root", older, ""), irt("root", newer))
		wantWarning(t, g, "hp", "root", problemVirtualHost, "HostConflict", `host "shop.example.com" is also claimed by the newer IngressRoute ir/root, which was rejected`)
		wantStatus(t, g, "ir", "root", StatusInvalid, `host "shop.example.com" belongs to the older HTTPProxy hp/root`)
		if got := serving(t, g); got != "HTTPProxy hp/root" {
			t.Errorf("served by %s", got)
		}
	})
	t.Run("older IngressRoute keeps the host from a newer HTTPProxy", func(t *testing.T) {
		g := build(hp("root", newer, ""), irt("root", older))
		wantInvalid(t, g, "hp", "root", problemVirtualHost, "HostConflict", `host "shop.example.com" belongs to the older IngressRoute ir/root`)
		wantStatus(t, g, "ir", "root", StatusValid, "is also claimed by the newer HTTPProxy hp/root")
		if got := serving(t, g); got != "IngressRoute ir/root" {
			t.Errorf("served by %s", got)
		}
	})
	t.Run("same age: every root is rejected", func(t *testing.T) {
		g := build(hp("root", older, ""), irt("root", older), hp("other", older, ""))
		wantInvalid(t, g, "hp", "root", problemVirtualHost, "HostConflict", `host "shop.example.com" is also claimed by`, "HTTPProxy hp/other", "IngressRoute ir/root", "created at the same time")
		wantInvalid(t, g, "hp", "other", problemVirtualHost, "HostConflict", "HTTPProxy hp/root")
		wantStatus(t, g, "ir", "root", StatusInvalid, "created at the same time")
		if got := serving(t, g); got != "nobody" {
			t.Errorf("served by %s", got)
		}
	})
	t.Run("an invalid older root still holds its host", func(t *testing.T) {
		g := build(hp("root", older, ", weight: -1"), hp("other", newer, ""), irt("root", newer), ingress(newer))
		wantInvalid(t, g, "hp", "root", problemService, "WeightInvalid")
		wantInvalid(t, g, "hp", "other", problemVirtualHost, "HostConflict", `belongs to the older HTTPProxy hp/root (invalid itself: fix or delete it to free the host)`)
		wantStatus(t, g, "ir", "root", StatusInvalid, "belongs to the older HTTPProxy hp/root (invalid itself")
		if s := statusOf(g, "ing", "web"); s.Status != StatusInvalid || !strings.Contains(s.Description, `host "shop.example.com" belongs to HTTPProxy hp/root`) {
			t.Errorf("Ingress status = %+v", s)
		}
		if got := serving(t, g); got != "nobody" {
			t.Errorf("served by %s", got)
		}
	})
	t.Run("older Ingress keeps the host", func(t *testing.T) {
		g := build(hp("root", newer, ""), ingress(older))
		wantInvalid(t, g, "hp", "root", problemVirtualHost, "HostConflict", `host "shop.example.com" is already served by Ingress ing/web`)
		if got := serving(t, g); got != "Ingress ing/web" {
			t.Errorf("served by %s", got)
		}
	})
	for _, created := range []string{newer, older} {
		t.Run("Ingress created "+created+" loses to the root", func(t *testing.T) {
			g := build(hp("root", older, ""), ingress(created), svc("hp", "hp", ":80"))
			wantClean(t, g, "hp", "root")
			if s := statusOf(g, "ing", "web"); s.Status != StatusInvalid || !strings.Contains(s.Description, `host "shop.example.com" belongs to HTTPProxy hp/root, which is not newer than this Ingress`) {
				t.Errorf("Ingress status = %+v", s)
			}
			if got := serving(t, g); got != "HTTPProxy hp/root" {
				t.Errorf("served by %s", got)
			}
		})
	}
	t.Run("host names compare without case", func(t *testing.T) {
		g := build(hp("root", older, ""), proxy(t, `{metadata: {name: upper, namespace: hp, creationTimestamp: "`+newer+`"}, spec: {virtualhost: {fqdn: SHOP.Example.com}, routes: [{services: [{name: hp, port: 80}]}]}}`))
		wantInvalid(t, g, "hp", "upper", problemVirtualHost, "HostConflict", "belongs to the older HTTPProxy hp/root")
	})
}

// The status of each kind of HTTPProxy: what a user reads in currentStatus, description
// and the Valid condition's errors and warnings.
func TestHTTPProxyStatus(t *testing.T) {
	g := build(
		proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: s.example.com}
  includes:
  - {name: child, conditions: [{prefix: /child}]}
  - {name: broken, conditions: [{prefix: /broken}]}
  routes:
  - services: [{name: web, port: 80}]
`),
		proxy(t, `{metadata: {name: child}, spec: {routes: [{services: [{name: missing, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: broken}, spec: {routes: [{services: [{name: web, port: 0}]}, {conditions: [{prefix: x}], services: [{name: web, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: lonely}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: other, annotations: {kubernetes.io/ingress.class: nginx}}, spec: {routes: [{services: [{name: web, port: 80}], authPolicy: {disabled: true}}]}}`),
		proxy(t, `{metadata: {name: otherclass}, spec: {ingressClassName: nginx, routes: [{services: [{name: web, port: 80}]}]}}`),
		svc("default", "web", ":80"),
	)
	root := proxyStatus(t, g, "default", "root")
	wantRoot := Status{
		Object: ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "root"}, Status: StatusValid, Root: true, Hosts: []string{"s.example.com"}, Noted: true,
		Description: `valid HTTPProxy; spec.includes[1] (prefix "/broken") is not followed on s.example.com: default/broken is invalid (see its status); requests matching its conditions get 503`,
		Warnings: []Problem{{Type: problemInclude, Reason: "IncludeInvalid",
			Message: `spec.includes[1] (prefix "/broken") is not followed on s.example.com: default/broken is invalid (see its status); requests matching its conditions get 503`}},
	}
	if diff := cmp.Diff(wantRoot, root); diff != "" {
		t.Errorf("root status (-want +got):\n%s", diff)
	}
	child := proxyStatus(t, g, "default", "child")
	wantChild := Status{
		Object: ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "child"}, Status: StatusValid, Hosts: []string{"s.example.com"}, Noted: true,
		Description: `valid HTTPProxy, included by HTTPProxy default/root on s.example.com (prefix "/child"); spec.routes[0].services[0]: Service default/missing not found: its routes answer 503 until it exists`,
		Warnings:    []Problem{{Type: problemService, Reason: "ServiceUnresolved", Message: "spec.routes[0].services[0]: Service default/missing not found: its routes answer 503 until it exists"}},
	}
	if diff := cmp.Diff(wantChild, child); diff != "" {
		t.Errorf("child status (-want +got):\n%s", diff)
	}
	broken := proxyStatus(t, g, "default", "broken")
	wantBroken := Status{
		Object: ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "broken"}, Status: StatusInvalid,
		Description: `not served: spec.routes[1].conditions[0].prefix "x" must start with "/"; spec.routes[0].services[0].port 0 must be 1-65535`,
		Errors: []Problem{
			{Type: problemRoute, Reason: "InvalidCondition", Message: `spec.routes[1].conditions[0].prefix "x" must start with "/"`},
			{Type: problemService, Reason: "PortInvalid", Message: "spec.routes[0].services[0].port 0 must be 1-65535"},
		},
	}
	if diff := cmp.Diff(wantBroken, broken); diff != "" {
		t.Errorf("broken status (-want +got):\n%s", diff)
	}
	lonely := proxyStatus(t, g, "default", "lonely")
	if lonely.Status != StatusOrphaned || lonely.Root || lonely.Hosts != nil || len(lonely.Warnings)+len(lonely.Errors) != 0 ||
		lonely.Description != "this HTTPProxy is not included by any root HTTPProxy (it has no spec.virtualhost): include it from a root, or give it a virtualhost" {
		t.Errorf("orphan status = %+v", lonely)
	}
	for _, name := range []string{"other", "otherclass"} {
		other := proxyStatus(t, g, "default", name)
		if other.Status != StatusIgnored || other.Description != `ingress class "nginx" is not "portico"` || len(other.Warnings)+len(other.Errors) != 0 {
			t.Errorf("%s status = %+v", name, other)
		}
	}
	if diff := cmp.Diff([]string{"Prefix /broken -> 503", "Prefix /child -> default/missing/80", "Prefix / -> default/web/80"}, proxyHTTP(g, "s.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}

	// An object included only by an invalid one is orphaned, and its status says who.
	g = build(
		proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: "bad host"}, includes: [{name: child}]}}`),
		proxy(t, `{metadata: {name: child}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`),
	)
	wantProxy(t, g, "default", "child", StatusOrphaned, "HTTPProxy default/root include it but are not served themselves")

	// A status writer compares warnings and errors too, not only the description.
	a := Status{Object: wantRoot.Object, Status: StatusValid, Description: "d", Warnings: []Problem{{Type: "T", Reason: "R", Message: "m"}}}
	b := a
	b.Warnings = []Problem{{Type: "T", Reason: "R2", Message: "m"}}
	c := a
	c.Errors = []Problem{{Type: "T", Reason: "R", Message: "m"}}
	d := a
	d.Warnings = append([]Problem(nil), a.Warnings...)
	if !a.Same(&d) || a.Same(&b) || a.Same(&c) {
		t.Errorf("Same: a~d %t (want true), a~b %t, a~c %t (want false)", a.Same(&d), a.Same(&b), a.Same(&c))
	}
}

// A root outside the root namespaces is invalid; one inside is served.
func TestHTTPProxyRootNamespaces(t *testing.T) {
	g := buildWith(Options{RootNamespaces: []string{"infra"}},
		proxy(t, `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: a.example.com}, routes: [{services: [{name: web, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: b.example.com}, includes: [{name: child, namespace: team}]}}`),
		proxy(t, `{metadata: {name: child, namespace: team}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`),
	)
	wantInvalid(t, g, "team", "root", problemRootNS, "RootProxyNotAllowedInNamespace", "only allowed in namespaces infra")
	wantProxy(t, g, "infra", "root", StatusValid)
	wantProxy(t, g, "team", "child", StatusValid)
	if http, _ := hostNames(g); !cmp.Equal(http, []string{"b.example.com"}) {
		t.Errorf("hosts = %v", http)
	}
}

// A build is deterministic: the same objects give the same graph and statuses.
func TestHTTPProxyBuildIsDeterministic(t *testing.T) {
	objs := func() []runtime.Object {
		var out []runtime.Object
		for i := range 5 {
			out = append(out,
				proxy(t, fmt.Sprintf(`{metadata: {name: r%d}, spec: {virtualhost: {fqdn: h%d.example.com}, includes: [{name: c, namespace: t%d, conditions: [{header: {name: x, exact: a}}]}, {name: c, namespace: t%d, conditions: [{prefix: /c}]}], routes: [{services: [{name: web, port: 80}]}, {conditions: [{header: {name: x, exact: b}}], services: [{name: web, port: 80}]}]}}`, i, i, i, i)),
				proxy(t, fmt.Sprintf(`{metadata: {name: c, namespace: t%d}, spec: {routes: [{services: [{name: web, port: 80}]}, {conditions: [{prefix: /c}], services: [{name: web, port: 80}]}]}}`, i)),
			)
		}
		return out
	}
	first := build(objs()...)
	for range 5 {
		if diff := cmp.Diff(first, build(objs()...)); diff != "" {
			t.Fatalf("builds differ (-first +again):\n%s", diff)
		}
	}
}
