package dag

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/testutil"
)

// An include's conditions and those of the included object's routes merge: prefixes
// concatenate (doubled slashes collapsed; a child's "/" leaves the include's prefix as it
// is), exact paths and regexes are relative to the include's prefix. The include's own
// conditions are sealed: what the child does not route under them gets 404 ("sealed"),
// unless a route of the child has exactly the include's conditions.
func TestHTTPProxyIncludeMergesPaths(t *testing.T) {
	for _, tc := range []struct {
		include, route string
		want           []string
		match, sealed  []string
		nomatch        []string
	}{
		{`[{prefix: /blog}]`, `[]`, []string{"Prefix /blog -> default/web/80"}, []string{"/blog", "/blog/x"}, nil, []string{"/blogx", "/"}},
		{`[{prefix: /blog}]`, `[{prefix: /}]`, []string{"Prefix /blog -> default/web/80"}, []string{"/blog", "/blog/x"}, nil, []string{"/blogx"}},
		{`[{prefix: /blog}]`, `[{prefix: /posts}]`, []string{"Prefix /blog/posts -> default/web/80", "Prefix /blog -> 404"}, []string{"/blog/posts", "/blog/posts/1"}, []string{"/blog", "/blog/postsx"}, []string{"/posts", "/blogx"}},
		{`[{prefix: /blog/}]`, `[{prefix: /posts}]`, []string{"Prefix /blog/posts -> default/web/80", "StringPrefix /blog/ -> 404"}, []string{"/blog/posts"}, []string{"/blog//posts"}, []string{"/blog"}},
		{`[{prefix: /blog}]`, `[{prefix: //posts}]`, []string{"Prefix /blog/posts -> default/web/80", "Prefix /blog -> 404"}, []string{"/blog/posts"}, nil, nil},
		{`[{prefix: /blog/}]`, `[]`, []string{"StringPrefix /blog/ -> default/web/80"}, []string{"/blog/", "/blog/x"}, nil, []string{"/blog"}},
		{`[{prefix: /blog/}]`, `[{prefix: /}]`, []string{"StringPrefix /blog/ -> default/web/80"}, []string{"/blog/x"}, nil, []string{"/blog"}},
		{`[{prefix: /blog}]`, `[{prefix: /posts/}]`, []string{"StringPrefix /blog/posts/ -> default/web/80", "Prefix /blog -> 404"}, []string{"/blog/posts/1"}, []string{"/blog/posts"}, nil},
		{`[{prefix: /}]`, `[{prefix: /x}]`, []string{"Prefix /x -> default/web/80", "Prefix / -> 404"}, []string{"/x"}, []string{"/y"}, nil},
		{`[{header: {name: x-a, present: true}}]`, `[{prefix: /x}]`, []string{"Prefix /x h:x-a? -> default/web/80", "Prefix / h:x-a? -> 404"}, []string{"/x/1"}, []string{"/y"}, nil},
		{`[{prefix: /blog}]`, `[{exact: /about}]`, []string{"Exact /blog/about -> default/web/80", "Prefix /blog -> 404"}, []string{"/blog/about"}, []string{"/blog/about/x"}, []string{"/about"}},
		{`[{prefix: /blog}]`, `[{regex: "/p/[0-9]+"}]`, []string{"Regex /blog(?:/p/[0-9]+) -> default/web/80", "Prefix /blog -> 404"}, []string{"/blog/p/12"}, []string{"/blog/p/x"}, []string{"/p/12"}},
		{`[{prefix: /blog.v1}]`, `[{regex: "/.*"}]`, []string{`Regex /blog\.v1(?:/.*) -> default/web/80`, "Prefix /blog.v1 -> 404"}, []string{"/blog.v1/x"}, nil, []string{"/blogXv1/x"}},
		{`[]`, `[{regex: "/a|/b"}]`, []string{"Regex /a|/b -> default/web/80", "Prefix / -> 404"}, []string{"/a", "/b"}, []string{"/c"}, nil},
	} {
		t.Run(tc.include+" "+tc.route, func(t *testing.T) {
			g := build(
				proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: child, conditions: `+tc.include+`}]}}`),
				proxy(t, `{metadata: {name: child}, spec: {routes: [{conditions: `+tc.route+`, services: [{name: web, port: 80}]}]}}`),
				svc("default", "web", ":80"),
			)
			wantClean(t, g, "default", "root")
			wantClean(t, g, "default", "child")
			if diff := cmp.Diff(tc.want, proxyHTTP(g, "m.example.com")); diff != "" {
				t.Fatalf("routes (-want +got):\n%s", diff)
			}
			routes := routesOfHost(t, g, "m.example.com")
			for _, p := range tc.match {
				checkServed(t, routes, expectation{req(p, "x-a: 1"), "web"})
			}
			for _, p := range tc.sealed {
				checkServed(t, routes, expectation{req(p, "x-a: 1"), "404"})
			}
			for _, p := range tc.nomatch {
				checkServed(t, routes, expectation{req(p, "x-a: 1"), "none"})
			}
			for _, r := range routes {
				if r.DirectStatus == 404 && r.Source != (ObjectRef{Kind: KindHTTPProxy, Namespace: "default", Name: "child"}) {
					t.Errorf("the seal %s comes from %s, want the included object", viewProxyRoute(r), r.Source)
				}
			}
		})
	}
}

// A followed include seals its conditions: the requests that match them but none of the
// included object's routes get 404, from the included object, never a shorter route of
// the includer (as for a delegated IngressRoute prefix). The seal is a stand-in: a route
// with the same conditions replaces it, and it never competes or warns.
func TestHTTPProxyIncludeSealsItsConditions(t *testing.T) {
	t.Run("what the included object does not route gets 404", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, routes: [{services: [{name: site, port: 80}]}], includes: [{name: blog, namespace: team, conditions: [{prefix: /blog}]}, {name: tenant, namespace: org-a, conditions: [{prefix: /api}, {header: {name: x-tenant, exact: org-a}}]}]}}`),
			proxy(t, `{metadata: {name: blog, namespace: team}, spec: {routes: [{conditions: [{prefix: /posts}], services: [{name: blog, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: tenant, namespace: org-a}, spec: {routes: [{conditions: [{prefix: /v2}], services: [{name: api, port: 80}]}]}}`),
			svc("default", "site", ":80"), svc("team", "blog", ":80"), svc("org-a", "api", ":80"),
		)
		for _, o := range [][2]string{{"default", "root"}, {"team", "blog"}, {"org-a", "tenant"}} {
			wantClean(t, g, o[0], o[1])
		}
		if diff := cmp.Diff([]string{
			"Prefix /blog/posts -> team/blog/80",
			"Prefix /api/v2 h:x-tenant=org-a -> org-a/api/80",
			"Prefix /blog -> 404",
			"Prefix /api h:x-tenant=org-a -> 404",
			"Prefix / -> default/site/80",
		}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
		routes := routesOfHost(t, g, "m.example.com")
		checkServed(t, routes,
			expectation{req("/blog/posts/1"), "team/blog"},
			expectation{req("/blog/drafts"), "404"},
			expectation{req("/blog"), "404"},
			expectation{req("/blogroll"), "site"},
			expectation{req("/api/v2/x", "x-tenant: org-a"), "org-a/api"},
			expectation{req("/api/v1", "x-tenant: org-a"), "404"},
			expectation{req("/api/v1", "x-tenant: org-b"), "site"},
			expectation{req("/api/v2"), "site"},
		)
		for _, r := range routes {
			if r.DirectStatus == 404 && r.Source.Namespace != "team" && r.Source.Namespace != "org-a" {
				t.Errorf("the seal %s comes from %s, want the included object", viewProxyRoute(r), r.Source)
			}
		}
	})
	t.Run("the includer's route with the same conditions replaces the seal", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: blog, conditions: [{prefix: /blog}]}], routes: [{conditions: [{prefix: /blog}], services: [{name: site, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: blog}, spec: {routes: [{conditions: [{prefix: /posts}], services: [{name: blog, port: 80}]}]}}`),
			svc("default", "site", ":80"), svc("default", "blog", ":80"),
		)
		wantClean(t, g, "default", "root")
		wantClean(t, g, "default", "blog")
		if diff := cmp.Diff([]string{"Prefix /blog/posts -> default/blog/80", "Prefix /blog -> default/site/80"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("nested includes with the same conditions give one seal", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: a, conditions: [{prefix: /x}]}]}}`),
			proxy(t, `{metadata: {name: a}, spec: {includes: [{name: b}]}}`),
			proxy(t, `{metadata: {name: b}, spec: {routes: [{conditions: [{prefix: /y}], services: [{name: web, port: 80}]}]}}`),
			svc("default", "web", ":80"),
		)
		for _, name := range []string{"root", "a", "b"} {
			wantClean(t, g, "default", name)
		}
		if diff := cmp.Diff([]string{"Prefix /x/y -> default/web/80", "Prefix /x -> 404"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("on plain HTTP the seal redirects like the routes it stands for", func(t *testing.T) {
		cert := testutil.SelfSigned("secure.example.com")
		g := build(tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM),
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: secure.example.com, tls: {secretName: cert}}, routes: [{services: [{name: site, port: 80}], permitInsecure: true}], includes: [{name: blog, conditions: [{prefix: /blog}], permitInsecure: true}]}}`),
			proxy(t, `{metadata: {name: blog}, spec: {routes: [{conditions: [{prefix: /open}], services: [{name: blog, port: 80}], permitInsecure: true}]}}`),
		)
		if diff := cmp.Diff([]string{"Prefix /blog/open -> default/blog/80", "Prefix /blog -> https", "Prefix / -> default/site/80"}, proxyHTTP(g, "secure.example.com")); diff != "" {
			t.Errorf("HTTP routes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"Prefix /blog/open -> default/blog/80", "Prefix /blog -> 404", "Prefix / -> default/site/80"}, proxyHTTPS(g, "secure.example.com")); diff != "" {
			t.Errorf("HTTPS routes (-want +got):\n%s", diff)
		}
	})
}

// A regex written in an included object can never match a path outside its include's
// prefix, whatever alternatives it holds; a regex that could is refused.
func TestHTTPProxyIncludedRegexStaysInsideTheInclude(t *testing.T) {
	build1 := func(t *testing.T, re string) *Graph {
		return build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: child, conditions: [{prefix: /blog}]}], routes: [{services: [{name: site, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: child}, spec: {routes: [{conditions: [{regex: "`+re+`"}], services: [{name: blog, port: 80}]}]}}`),
			svc("default", "site", ":80"), svc("default", "blog", ":80"),
		)
	}
	// nomatch reach the root's route; sealed are inside the include, which answers 404.
	for _, tc := range []struct {
		re                     string
		match, nomatch, sealed []string
	}{
		{`/a|/b`, []string{"/blog/a", "/blog/b"}, []string{"/a", "/b"}, []string{"/blog/c", "/blog/ab"}},
		{`/(a|b)|/c.*`, []string{"/blog/a", "/blog/cc"}, []string{"/c", "/blogc"}, []string{"/blog/d"}},
		{`/a$|/b`, []string{"/blog/a"}, []string{"/a", "/b"}, []string{"/blog/b/x"}},
		{`/(?i)A|/B`, []string{"/blog/a", "/blog/B"}, []string{"/BLOG/a", "/b"}, []string{"/blog/c"}},
	} {
		t.Run(tc.re, func(t *testing.T) {
			g := build1(t, tc.re)
			wantClean(t, g, "default", "child")
			routes := routesOfHost(t, g, "m.example.com")
			for _, r := range routes {
				if r.Path.Kind == PathRegex {
					mustFullRegex(t, r.Path.Value)
				}
			}
			for _, p := range tc.match {
				checkServed(t, routes, expectation{req(p), "blog"})
			}
			for _, p := range tc.nomatch {
				checkServed(t, routes, expectation{req(p), "site"})
			}
			for _, p := range tc.sealed {
				checkServed(t, routes, expectation{req(p), "404"})
			}
		})
	}
	for _, tc := range []struct{ re, why string }{
		{`/?x`, `must match only paths that start with "/"`},
		{`(/a)|(/b)`, `must start with "/"`},
		{`(?i)/a`, `must start with "/"`},
		{`/x|.*`, `must match only paths that start with "/"`},
		{`/x|`, `must match only paths that start with "/"`},
		{`/a\\Q`, `cannot be used inside a group`},
		{`/a\\Q)|(/b`, `cannot be used inside a group`},
	} {
		t.Run(tc.re, func(t *testing.T) {
			g := build1(t, tc.re)
			wantInvalid(t, g, "default", "child", problemRoute, "InvalidCondition", "spec.routes[0].conditions[0].regex", tc.why)
			wantWarning(t, g, "default", "root", problemInclude, "IncludeInvalid")
			checkServed(t, routesOfHost(t, g, "m.example.com"),
				expectation{req("/blog/x"), "503"}, expectation{req("/x"), "site"}, expectation{req("/blogx"), "site"})
		})
	}
}

// A regex that is within bounds on its own but not once the include's prefix is added
// is not served there; the object says so.
func TestHTTPProxyIncludedRegexTooComplexUnderItsPrefix(t *testing.T) {
	long := "/" + strings.Repeat("p", 60)
	g := build(
		proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: child, conditions: [{prefix: `+long+`}]}, {name: child, conditions: [{prefix: /short}]}]}}`),
		proxy(t, `{metadata: {name: child}, spec: {routes: [{services: [{name: web, port: 80}]}, {conditions: [{regex: "/[a-z]+/[0-9]+/`+strings.Repeat("x", 40)+`"}], services: [{name: web, port: 80}]}]}}`),
		svc("default", "web", ":80"),
	)
	wantWarning(t, g, "default", "child", problemRoute, "RegexTooComplex", "spec.routes[1] is not served on m.example.com", "is too complex")
	var regexes int
	for _, r := range routesOfHost(t, g, "m.example.com") {
		if r.Path.Kind == PathRegex {
			regexes++
			if p := checkRegex(r.Path.Value); p != "" {
				t.Errorf("a route's regex is over the bound: %s", p)
			}
		}
	}
	if regexes != 1 {
		t.Errorf("%d regex routes, want 1 (under /short): %v", regexes, proxyHTTP(g, "m.example.com"))
	}
}

// Header and query conditions are ANDed down the include chain, over any number of levels.
func TestHTTPProxyIncludeMergesConditionsRecursively(t *testing.T) {
	g := build(
		proxy(t, `
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: m.example.com}
  includes:
  - name: mid
    namespace: team
    conditions: [{prefix: /a}, {header: {name: x-tenant, exact: one}}]
  routes: [{services: [{name: web, port: 80}]}]
`),
		proxy(t, `
metadata: {name: mid, namespace: team}
spec:
  includes:
  - name: leaf
    namespace: sub
    conditions: [{prefix: /b}, {queryParameter: {name: v, exact: "2"}}, {cookie: beta=1}]
  routes: [{conditions: [{header: {name: x-mid, present: true}}], services: [{name: mid, port: 80}]}]
`),
		proxy(t, `
metadata: {name: leaf, namespace: sub}
spec:
  routes:
  - conditions: [{prefix: /c}, {header: {name: x-leaf, exact: "yes"}}, {queryParameter: {name: w, present: true}}]
    services: [{name: leaf, port: 80}]
  - services: [{name: leaf-all, port: 80}]
`),
	)
	wantProxy(t, g, "sub", "leaf", StatusValid, `included by HTTPProxy team/mid on m.example.com (prefix "/a/b", header x-tenant exact "one", header cookie regex`, `query v exact "2")`)
	routes := routesOfHost(t, g, "m.example.com")
	var leaf []string
	for _, r := range routes {
		if r.Source.Name == "leaf" {
			leaf = append(leaf, viewProxyRoute(r))
		}
	}
	cookie := `h:cookie=~` + cookieRegex(t, "beta=1")
	want := []string{
		"Prefix /a/b/c h:x-tenant=one " + cookie + " h:x-leaf=yes q:v=2 q:w? -> sub/leaf/80",
		"Prefix /a/b h:x-tenant=one " + cookie + " q:v=2 -> sub/leaf-all/80",
	}
	if diff := cmp.Diff(want, leaf); diff != "" {
		t.Errorf("leaf routes (-want +got):\n%s", diff)
	}
	checkServed(t, routes,
		expectation{req("/a/b/c?v=2&w=1", "x-tenant: one", "cookie: a=1; beta=1", "x-leaf: yes"), "sub/leaf"},
		expectation{req("/a/b/c?v=2", "x-tenant: one", "cookie: beta=1", "x-leaf: yes"), "sub/leaf-all"},
		expectation{req("/a/b/c?v=2&w=1", "x-tenant: two", "cookie: beta=1", "x-leaf: yes"), "infra/web"},
		expectation{req("/a/b/c?v=2&w=1", "x-tenant: one", "x-leaf: yes", "x-mid: 1"), "team/mid"},
		expectation{req("/a", "x-tenant: one", "x-mid: 1"), "team/mid"},
		expectation{req("/a", "x-mid: 1"), "infra/web"},
	)
}

func cookieRegex(t *testing.T, spec string) string {
	h, p := cookieCondition(spec)
	if p != "" {
		t.Fatal(p)
	}
	return h.Value
}

// An include that cannot be followed leaves its including object valid with a warning,
// and its requests answered 503 under the include's merged conditions, never by a
// shorter route.
func TestHTTPProxyUnfollowedIncludesAnswer503(t *testing.T) {
	for _, tc := range []struct {
		name   string
		target string // the included object, "" for none
		reason string
		parts  []string
	}{
		{"missing", "", "IncludeNotFound", []string{"team/target does not exist"}},
		{"root", `{metadata: {name: target, namespace: team}, spec: {virtualhost: {fqdn: other.example.com}, routes: [{services: [{name: web, port: 80}]}]}}`, "RootIncludesRoot", []string{"team/target is a root"}},
		{"invalid", `{metadata: {name: target, namespace: team}, spec: {routes: [{services: [{name: web, port: 80}], timeoutPolicy: {response: soon}}]}}`, "IncludeInvalid", []string{"team/target is invalid (see its status)"}},
		{"another class", `{metadata: {name: target, namespace: team}, spec: {ingressClassName: other, routes: [{services: [{name: web, port: 80}]}]}}`, "IncludeOtherClass", []string{"team/target belongs to another ingress class"}},
		{"TCP proxy only", `{metadata: {name: target, namespace: team}, spec: {tcpproxy: {services: [{name: db, port: 5432}]}}}`, "IncludeNothingToRoute", []string{"team/target has no routes or includes for HTTP requests"}},
		{"another class by annotation", `{metadata: {name: target, namespace: team, annotations: {projectcontour.io/ingress.class: other}}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`, "IncludeOtherClass", []string{"belongs to another ingress class"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{
				proxy(t, `{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: mid, namespace: team, conditions: [{prefix: /team}, {header: {name: x-team, present: true}}]}], routes: [{services: [{name: web, port: 80}]}]}}`),
				proxy(t, `{metadata: {name: mid, namespace: team}, spec: {includes: [{name: target, conditions: [{prefix: /t}, {queryParameter: {name: q, present: true}}]}], routes: [{services: [{name: web, port: 80}]}]}}`),
			}
			if tc.target != "" {
				objs = append(objs, proxy(t, tc.target))
			}
			g := build(objs...)
			st := wantWarning(t, g, "team", "mid", problemInclude, tc.reason, append([]string{`spec.includes[0] (prefix "/team/t", header x-team present, query q present) is not followed on m.example.com`, "requests matching its conditions get 503"}, tc.parts...)...)
			if len(st.Errors) > 0 {
				t.Errorf("the including object has errors: %+v", st.Errors)
			}
			routes := routesOfHost(t, g, "m.example.com")
			if diff := cmp.Diff([]string{
				"Prefix /team/t h:x-team? q:q? -> 503",
				"Prefix /team h:x-team? -> team/web/80",
				"Prefix / -> infra/web/80",
			}, viewProxyRoutes(routes)); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
			checkServed(t, routes,
				expectation{req("/team/t/x?q=1", "x-team: a"), "503"},
				expectation{req("/team/t?q", "x-team: a"), "503"},
				expectation{req("/team/t", "x-team: a"), "team/web"},
				expectation{req("/team/t?q=1"), "infra/web"},
			)
			if tc.name == "root" {
				wantWarning(t, g, "team", "target", problemInclude, "RootIncluded", "HTTPProxy team/mid includes it, which is refused")
				if vh := httpHost(g, "other.example.com"); vh == nil || len(vh.Routes) != 1 {
					t.Errorf("the included root does not serve its own host")
				}
			}
		})
	}
}

// An include cycle makes invalid its newest object (creationTimestamp, then
// namespace/name), naming the cycle from it; whoever includes that object answers 503
// where it would have led, and the other objects of the cycle stay valid.
func TestHTTPProxyIncludeCycles(t *testing.T) {
	t.Run("two objects", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: a, namespace: team-a, conditions: [{prefix: /a}]}]}}`),
			proxy(t, `{metadata: {name: a, namespace: team-a}, spec: {includes: [{name: b, namespace: team-b, conditions: [{prefix: /b}]}], routes: [{services: [{name: web, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: b, namespace: team-b}, spec: {includes: [{name: a, namespace: team-a, conditions: [{prefix: /again}]}], routes: [{services: [{name: web, port: 80}]}]}}`),
		)
		wantInvalid(t, g, "team-b", "b", problemInclude, "IncludeCreatesCycle", "its include closes a cycle: HTTPProxy team-b/b -> HTTPProxy team-a/a -> HTTPProxy team-b/b; it is the newest object on the cycle")
		wantWarning(t, g, "team-a", "a", problemInclude, "IncludeInvalid", `spec.includes[0] (prefix "/a/b") is not followed`, "team-b/b is invalid")
		wantProxy(t, g, "default", "root", StatusValid)
		if diff := cmp.Diff([]string{"Prefix /a/b -> 503", "Prefix /a -> team-a/web/80"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("itself", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: a, conditions: [{prefix: /a}]}]}}`),
			proxy(t, `{metadata: {name: a}, spec: {includes: [{name: a, conditions: [{prefix: /a}]}], routes: [{services: [{name: web, port: 80}]}]}}`),
		)
		wantInvalid(t, g, "default", "a", problemInclude, "IncludeCreatesCycle", "HTTPProxy default/a -> HTTPProxy default/a")
		wantWarning(t, g, "default", "root", problemInclude, "IncludeInvalid")
		if diff := cmp.Diff([]string{"Prefix /a -> 503"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("three objects, by headers", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: a, conditions: [{header: {name: x, exact: a}}]}]}}`),
			proxy(t, `{metadata: {name: a}, spec: {includes: [{name: b, conditions: [{header: {name: y, exact: b}}]}]}}`),
			proxy(t, `{metadata: {name: b}, spec: {includes: [{name: c, conditions: [{header: {name: z, exact: c}}]}]}}`),
			proxy(t, `{metadata: {name: c}, spec: {includes: [{name: a}]}}`),
		)
		wantInvalid(t, g, "default", "c", problemInclude, "IncludeCreatesCycle", "HTTPProxy default/c -> HTTPProxy default/a -> HTTPProxy default/b -> HTTPProxy default/c")
		wantProxy(t, g, "default", "a", StatusValid)
		wantWarning(t, g, "default", "b", problemInclude, "IncludeInvalid")
	})
	t.Run("the newest object, wherever the root enters", func(t *testing.T) {
		// The root enters at a, and b's include closes the walk's loop; but a is the
		// newest, so a is the one not served.
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: a, conditions: [{prefix: /a}]}], routes: [{services: [{name: web, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: a, creationTimestamp: "2026-03-01T00:00:00Z"}, spec: {includes: [{name: b, conditions: [{prefix: /b}]}], routes: [{services: [{name: web, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: b, creationTimestamp: "2026-01-01T00:00:00Z"}, spec: {includes: [{name: a}], routes: [{services: [{name: web, port: 80}]}]}}`),
		)
		wantInvalid(t, g, "default", "a", problemInclude, "IncludeCreatesCycle", "HTTPProxy default/a -> HTTPProxy default/b -> HTTPProxy default/a")
		wantProxy(t, g, "default", "b", StatusOrphaned, "HTTPProxy default/a include it but are not served themselves")
		wantWarning(t, g, "default", "root", problemInclude, "IncludeInvalid", "default/a is invalid")
		if diff := cmp.Diff([]string{"Prefix /a -> 503", "Prefix / -> default/web/80"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("not reached from a root", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: c}, spec: {includes: [{name: d}]}}`),
			proxy(t, `{metadata: {name: d}, spec: {includes: [{name: c}]}}`),
		)
		wantInvalid(t, g, "default", "d", problemInclude, "IncludeCreatesCycle", "HTTPProxy default/d -> HTTPProxy default/c -> HTTPProxy default/d")
		wantProxy(t, g, "default", "c", StatusOrphaned, "HTTPProxy default/d include it but are not served themselves")
	})
	t.Run("two loops through one object", func(t *testing.T) {
		// a -> b -> a and a -> c -> a: the newest of the component (c) goes first, then
		// the newest of what is left (b).
		g := build(
			proxy(t, `{metadata: {name: a, creationTimestamp: "2026-01-01T00:00:00Z"}, spec: {includes: [{name: b, conditions: [{prefix: /b}]}, {name: c, conditions: [{prefix: /c}]}]}}`),
			proxy(t, `{metadata: {name: b, creationTimestamp: "2026-02-01T00:00:00Z"}, spec: {includes: [{name: a}]}}`),
			proxy(t, `{metadata: {name: c, creationTimestamp: "2026-03-01T00:00:00Z"}, spec: {includes: [{name: a}]}}`),
		)
		wantInvalid(t, g, "default", "c", problemInclude, "IncludeCreatesCycle", "HTTPProxy default/c -> HTTPProxy default/a -> HTTPProxy default/c")
		wantInvalid(t, g, "default", "b", problemInclude, "IncludeCreatesCycle", "HTTPProxy default/b -> HTTPProxy default/a -> HTTPProxy default/b")
		wantProxy(t, g, "default", "a", StatusOrphaned)
	})
}

// Which object of a cycle is invalid does not depend on the roots: a second root (of
// another team) that includes the cycle at another object does not move the blame,
// and the first root's routes stay as they were.
func TestHTTPProxyCycleEnteredByAnotherRoot(t *testing.T) {
	objs := []runtime.Object{
		proxy(t, `{metadata: {name: app, namespace: platform}, spec: {virtualhost: {fqdn: app.example.com}, routes: [{services: [{name: web, port: 80}]}], includes: [{name: a, namespace: team-a, conditions: [{prefix: /a}]}]}}`),
		proxy(t, `{metadata: {name: a, namespace: team-a, creationTimestamp: "2026-01-01T00:00:00Z"}, spec: {includes: [{name: b, namespace: blog, conditions: [{prefix: /b}]}], routes: [{conditions: [{prefix: /x}], services: [{name: ax, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: b, namespace: blog, creationTimestamp: "2026-02-01T00:00:00Z"}, spec: {includes: [{name: a, namespace: team-a, conditions: [{prefix: /again}]}], routes: [{services: [{name: bb, port: 80}]}]}}`),
	}
	// In name order this root is met first, and it enters the cycle at b.
	second := proxy(t, `{metadata: {name: r, namespace: blog}, spec: {virtualhost: {fqdn: blog.example.com}, includes: [{name: b, conditions: [{prefix: /blog}]}]}}`)
	want := []string{"Prefix /a/b -> 503", "Prefix /a/x -> team-a/ax/80", "Prefix /a -> 404", "Prefix / -> platform/web/80"}
	for i, g := range []*Graph{build(objs...), build(append(objs, second)...)} {
		if diff := cmp.Diff(want, proxyHTTP(g, "app.example.com")); diff != "" {
			t.Errorf("build %d: routes (-want +got):\n%s", i, diff)
		}
		wantProxy(t, g, "team-a", "a", StatusValid)
		wantInvalid(t, g, "blog", "b", problemInclude, "IncludeCreatesCycle", "its include closes a cycle: HTTPProxy blog/b -> HTTPProxy team-a/a -> HTTPProxy blog/b")
	}
	g := build(append(objs, second)...)
	wantWarning(t, g, "blog", "r", problemInclude, "IncludeInvalid", "blog/b is invalid")
	if diff := cmp.Diff([]string{"Prefix /blog -> 503"}, proxyHTTP(g, "blog.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// Static checks of includes: each include needs conditions of its own, and may only use
// prefix, header and query conditions.
func TestHTTPProxyInvalidIncludes(t *testing.T) {
	for _, tc := range []struct {
		name, includes string
		reason         string
		parts          []string
	}{
		{"same conditions", `[{name: a, conditions: [{prefix: /a}]}, {name: b, conditions: [{prefix: /a}]}]`, "DuplicateMatchConditions", []string{`spec.includes[1] and spec.includes[0] have the same conditions (prefix "/a")`}},
		{"same headers in another order", `[{name: a, conditions: [{prefix: /a}, {header: {name: x, exact: "1"}}, {header: {name: y, exact: "2"}}]}, {name: b, conditions: [{header: {name: y, exact: "2"}}, {prefix: /a}, {header: {name: x, exact: "1"}}]}]`, "DuplicateMatchConditions", []string{"spec.includes[1] and spec.includes[0]"}},
		{"no conditions and prefix /", `[{name: a}, {name: b, conditions: [{prefix: /}]}]`, "DuplicateMatchConditions", []string{"spec.includes[1] and spec.includes[0]"}},
		{"one object twice", `[{name: a, conditions: [{prefix: /a}]}, {name: a, conditions: [{prefix: /a}]}]`, "DuplicateMatchConditions", nil},
		{"exact", `[{name: a, conditions: [{exact: /a}]}]`, "InvalidCondition", []string{"spec.includes[0].conditions[0].exact: an include's conditions cannot use exact"}},
		{"regex", `[{name: a, conditions: [{regex: /a.*}]}]`, "InvalidCondition", []string{"spec.includes[0].conditions[0].regex: an include's conditions cannot use regex"}},
		{"bad header", `[{name: a, conditions: [{header: {name: x}}]}]`, "InvalidCondition", []string{"spec.includes[0].conditions[0].header"}},
		{"no name", `[{conditions: [{prefix: /a}]}]`, "NameMissing", []string{"spec.includes[0].name is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(
				proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: `+tc.includes+`}}`),
				proxy(t, `{metadata: {name: a}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`),
				proxy(t, `{metadata: {name: b}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`),
			)
			wantInvalid(t, g, "default", "root", problemInclude, tc.reason, tc.parts...)
			if http, _ := hostNames(g); len(http) != 0 {
				t.Errorf("an invalid root is served: %v", http)
			}
			if tc.name != "no name" {
				wantProxy(t, g, "default", "a", StatusOrphaned, "HTTPProxy default/root include it but are not served themselves")
			}
		})
	}
}

// Services resolve in the namespace of the object that names them, never in the
// including object's.
func TestHTTPProxyServicesResolveInTheObjectsOwnNamespace(t *testing.T) {
	g := build(
		proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: child, namespace: team-a, conditions: [{prefix: /a}]}], routes: [{services: [{name: backend, port: 80}]}]}}`),
		proxy(t, `{metadata: {name: child, namespace: team-a}, spec: {routes: [{services: [{name: backend, port: 80}]}, {conditions: [{prefix: /x}], services: [{name: other, port: 80}]}]}}`),
		svc("default", "backend", ":80"), svc("default", "other", ":80"), svc("team-a", "backend", ":80"),
		endpoints("default", "backend", "", 8080, "10.0.0.1"), endpoints("team-a", "backend", "", 8080, "10.1.0.1"),
	)
	if diff := cmp.Diff([]string{
		"Prefix /a/x -> team-a/other/80",
		"Prefix /a -> team-a/backend/80",
		"Prefix / -> default/backend/80",
	}, proxyHTTP(g, "m.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	routes := routesOfHost(t, g, "m.example.com")
	if ep := routes[1].Clusters[0].Cluster.Endpoints; len(ep) != 1 || ep[0].Address != "10.1.0.1" {
		t.Errorf("team-a's route reaches %v", ep)
	}
	wantWarning(t, g, "team-a", "child", problemService, "ServiceUnresolved", "Service team-a/other not found")
}

// One object may be included several times, under different conditions (and from
// different roots): it serves under each, and its status names each include.
func TestHTTPProxySameObjectIncludedTwice(t *testing.T) {
	g := build(
		proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: shared, namespace: lib, conditions: [{prefix: /v1}]}, {name: shared, namespace: lib, conditions: [{prefix: /v2}, {header: {name: x-v, exact: "2"}}]}]}}`),
		proxy(t, `{metadata: {name: other}, spec: {virtualhost: {fqdn: o.example.com}, includes: [{name: shared, namespace: lib}]}}`),
		proxy(t, `{metadata: {name: shared, namespace: lib}, spec: {routes: [{services: [{name: web, port: 80}]}, {conditions: [{prefix: /s}], services: [{name: web, port: 80}]}]}}`),
		svc("lib", "web", ":80"),
	)
	st := wantProxy(t, g, "lib", "shared", StatusValid,
		`included by HTTPProxy default/root on m.example.com (prefix "/v1")`,
		`included by HTTPProxy default/root on m.example.com (prefix "/v2", header x-v exact "2")`,
		`included by HTTPProxy default/other on o.example.com (prefix "/")`)
	if !cmp.Equal(st.Hosts, []string{"m.example.com", "o.example.com"}) {
		t.Errorf("hosts = %v", st.Hosts)
	}
	if diff := cmp.Diff([]string{
		"Prefix /v1/s -> lib/web/80",
		"Prefix /v2/s h:x-v=2 -> lib/web/80",
		"Prefix /v1 -> lib/web/80",
		"Prefix /v2 h:x-v=2 -> lib/web/80",
	}, proxyHTTP(g, "m.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Prefix /s -> lib/web/80", "Prefix / -> lib/web/80"}, proxyHTTP(g, "o.example.com")); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// Routes with the same merged conditions: the one closer to the root wins and the other
// object is told; between routes as deep, the first reached wins.
func TestHTTPProxyDuplicateMergedConditions(t *testing.T) {
	t.Run("root wins", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: child, namespace: team, conditions: [{prefix: /blog}]}], routes: [{conditions: [{prefix: /blog}], services: [{name: web, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: child, namespace: team}, spec: {routes: [{services: [{name: blog, port: 80}]}, {conditions: [{prefix: /posts}], services: [{name: blog, port: 80}]}]}}`),
		)
		wantWarning(t, g, "team", "child", problemRoute, "DuplicateMatchConditions", `route (prefix "/blog") is not served on m.example.com: HTTPProxy default/root, closer to the root, has a route with the same conditions`)
		wantProxy(t, g, "default", "root", StatusValid)
		if diff := cmp.Diff([]string{"Prefix /blog/posts -> team/blog/80", "Prefix /blog -> default/web/80"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("no path condition is prefix /", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: child, namespace: team}], routes: [{services: [{name: web, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: child, namespace: team}, spec: {routes: [{conditions: [{prefix: /}], services: [{name: other, port: 80}]}]}}`),
		)
		wantWarning(t, g, "team", "child", problemRoute, "DuplicateMatchConditions", `route (prefix "/") is not served`)
		if diff := cmp.Diff([]string{"Prefix / -> default/web/80"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("in one object", func(t *testing.T) {
		g := build(proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, routes: [{services: [{name: web, port: 80}]}, {conditions: [{prefix: /}], services: [{name: web, port: 80}]}]}}`))
		wantInvalid(t, g, "default", "root", problemRoute, "DuplicateMatchConditions", `spec.routes[1] and spec.routes[0] have the same conditions (prefix "/")`)
	})
	t.Run("a direct response loses like any route", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: child, namespace: team, conditions: [{prefix: /blog}]}], routes: [{conditions: [{prefix: /blog}], services: [{name: web, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: child, namespace: team}, spec: {routes: [{directResponsePolicy: {statusCode: 200, body: hi}}]}}`),
		)
		wantWarning(t, g, "team", "child", problemRoute, "DuplicateMatchConditions", `route (prefix "/blog") is not served`)
	})
	t.Run("a closer route reached later still wins", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: a, conditions: [{prefix: /x}]}, {name: b, conditions: [{prefix: /x/y}]}]}}`),
			proxy(t, `{metadata: {name: a}, spec: {includes: [{name: c, conditions: [{prefix: /y}]}]}}`),
			proxy(t, `{metadata: {name: b}, spec: {routes: [{services: [{name: b, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: c}, spec: {routes: [{services: [{name: c, port: 80}]}]}}`),
			svc("default", "b", ":80"),
		)
		wantWarning(t, g, "default", "c", problemRoute, "DuplicateMatchConditions", `route (prefix "/x/y") is not served on m.example.com: HTTPProxy default/b, closer to the root`)
		st := proxyStatus(t, g, "default", "b")
		if len(st.Warnings) > 0 {
			t.Errorf("the winner is warned: %+v", st.Warnings)
		}
		// a's include seals /x: a has no route of its own there.
		if diff := cmp.Diff([]string{"Prefix /x/y -> default/b/80", "Prefix /x -> 404"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
	t.Run("siblings as deep", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: a, conditions: [{prefix: /x}]}, {name: b, conditions: [{prefix: /x/y}]}]}}`),
			proxy(t, `{metadata: {name: a}, spec: {routes: [{conditions: [{prefix: /y}], services: [{name: a, port: 80}]}]}}`),
			proxy(t, `{metadata: {name: b}, spec: {routes: [{services: [{name: b, port: 80}]}]}}`),
		)
		wantWarning(t, g, "default", "b", problemRoute, "DuplicateMatchConditions", `route (prefix "/x/y") is not served on m.example.com: HTTPProxy default/a, as deep in the includes and reached first`)
		if diff := cmp.Diff([]string{"Prefix /x/y -> default/a/80", "Prefix /x -> 404"}, proxyHTTP(g, "m.example.com")); diff != "" {
			t.Errorf("routes (-want +got):\n%s", diff)
		}
	})
}

// permitInsecure across teams: a route in an included object is served over plain HTTP
// only when every include on its path grants it; otherwise it redirects and its object
// is warned. An intermediate object cannot widen what the root granted.
func TestHTTPProxyIncludedPermitInsecure(t *testing.T) {
	cert := testutil.SelfSigned("secure.example.com")
	secret := tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM)
	build3 := func(rootGrants, midGrants bool) *Graph {
		return build(secret,
			proxy(t, fmt.Sprintf(`{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: secure.example.com, tls: {secretName: cert}}, includes: [{name: mid, namespace: team, conditions: [{prefix: /team}], permitInsecure: %t}]}}`, rootGrants)),
			proxy(t, fmt.Sprintf(`{metadata: {name: mid, namespace: team}, spec: {includes: [{name: leaf, namespace: sub, conditions: [{prefix: /sub}], permitInsecure: %t}], routes: [{conditions: [{prefix: /open}], services: [{name: mid, port: 80}], permitInsecure: true}, {services: [{name: mid, port: 80}]}]}}`, midGrants)),
			proxy(t, `{metadata: {name: leaf, namespace: sub}, spec: {routes: [{conditions: [{prefix: /open}], services: [{name: leaf, port: 80}], permitInsecure: true}, {services: [{name: leaf, port: 80}]}]}}`),
		)
	}
	for _, tc := range []struct {
		root, mid          bool
		midOpen, leafOpen  bool
		midWarns, leafWarn bool
	}{
		{root: true, mid: true, midOpen: true, leafOpen: true},
		{root: true, mid: false, midOpen: true, leafOpen: false, leafWarn: true},
		{root: false, mid: true, midOpen: false, leafOpen: false, midWarns: true, leafWarn: true},
		{root: false, mid: false, midWarns: true, leafWarn: true},
	} {
		t.Run(fmt.Sprintf("root grants %t, mid grants %t", tc.root, tc.mid), func(t *testing.T) {
			g := build3(tc.root, tc.mid)
			target := func(open bool, cluster string) string {
				if open {
					return cluster
				}
				return "https"
			}
			want := []string{
				"Prefix /team/sub/open -> " + target(tc.leafOpen, "sub/leaf/80"),
				"Prefix /team/open -> " + target(tc.midOpen, "team/mid/80"),
				"Prefix /team/sub -> https",
				"Prefix /team -> https",
			}
			if diff := cmp.Diff(want, proxyHTTP(g, "secure.example.com")); diff != "" {
				t.Errorf("HTTP routes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{
				"Prefix /team/sub/open -> sub/leaf/80", "Prefix /team/open -> team/mid/80", "Prefix /team/sub -> sub/leaf/80", "Prefix /team -> team/mid/80",
			}, proxyHTTPS(g, "secure.example.com")); diff != "" {
				t.Errorf("HTTPS routes (-want +got):\n%s", diff)
			}
			for _, o := range []struct {
				ns, name string
				warns    bool
			}{{"team", "mid", tc.midWarns}, {"sub", "leaf", tc.leafWarn}} {
				st := proxyStatus(t, g, o.ns, o.name)
				if o.warns {
					wantWarning(t, g, o.ns, o.name, problemInsecure, "PermitInsecureNotGranted", "spec.routes[0].permitInsecure is ignored on secure.example.com", "it is redirected to HTTPS")
				} else if slices.ContainsFunc(st.Warnings, func(p Problem) bool { return p.Type == problemInsecure }) {
					t.Errorf("%s/%s warnings = %+v, want none about permitInsecure", o.ns, o.name, st.Warnings)
				}
			}
		})
	}
	t.Run("without TLS there is nothing to warn about", func(t *testing.T) {
		g := build(
			proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: plain.example.com}, includes: [{name: child}]}}`),
			proxy(t, `{metadata: {name: child}, spec: {routes: [{services: [{name: web, port: 80}], permitInsecure: true}]}}`),
			svc("default", "web", ":80"),
		)
		wantClean(t, g, "default", "child")
		if diff := cmp.Diff([]string{"Prefix / -> default/web/80"}, proxyHTTP(g, "plain.example.com")); diff != "" {
			t.Errorf("HTTP routes (-want +got):\n%s", diff)
		}
	})
	t.Run("an unfollowed include redirects too", func(t *testing.T) {
		g := build(secret, proxy(t, `{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: secure.example.com, tls: {secretName: cert}}, includes: [{name: missing, conditions: [{prefix: /m}], permitInsecure: true}]}}`))
		if diff := cmp.Diff([]string{"Prefix /m -> https"}, proxyHTTP(g, "secure.example.com")); diff != "" {
			t.Errorf("HTTP routes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"Prefix /m -> 503"}, proxyHTTPS(g, "secure.example.com")); diff != "" {
			t.Errorf("HTTPS routes (-want +got):\n%s", diff)
		}
	})
}

// An object included under many conditions by objects included many times cannot blow a
// build up: past a bound the root answers 503 and says so.
func TestHTTPProxyIncludeExplosionIsBounded(t *testing.T) {
	var objs []runtime.Object
	objs = append(objs, proxy(t, `{metadata: {name: root}, spec: {virtualhost: {fqdn: m.example.com}, includes: [{name: l0, conditions: [{prefix: /a}]}, {name: l0, conditions: [{prefix: /b}]}]}}`))
	const levels = 20
	for i := range levels {
		next := fmt.Sprintf("l%d", i+1)
		if i == levels-1 {
			objs = append(objs, proxy(t, fmt.Sprintf(`{metadata: {name: l%d}, spec: {routes: [{services: [{name: web, port: 80}]}]}}`, i)))
			break
		}
		objs = append(objs, proxy(t, fmt.Sprintf(`{metadata: {name: l%d}, spec: {includes: [{name: %s, conditions: [{prefix: /a}]}, {name: %s, conditions: [{prefix: /b}]}], routes: [{services: [{name: web, port: 80}]}]}}`, i, next, next)))
	}
	start := time.Now()
	g := build(objs...)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("build took %s", d)
	}
	wantWarning(t, g, "default", "root", problemInclude, "TooManyIncludes", "reach more than 1000 objects")
	if n := len(routesOfHost(t, g, "m.example.com")); n > 3*maxProxyVisits {
		t.Errorf("%d routes", n)
	}
}
