package proxy

import (
	"runtime"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/portico-dev/portico/internal/proxy/router"
)

func regexRewrite(pattern, substitution string) *matcherv3.RegexMatchAndSubstitute {
	return &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: pattern}, Substitution: substitution}
}

// TestRegexRewriteSubstitutions: RE2's rewrite strings, as Envoy runs them: every
// match is replaced, "\N" is a capture group, "\\" a backslash, "$" is literal.
func TestRegexRewriteSubstitutions(t *testing.T) {
	for _, tc := range []struct{ pattern, subst, path, want string }{
		{"^/.*$", "/one", "/full/one/two", "/one"},
		{`^/foo/?`, "/", "/foo/bar", "/bar"},
		{`^/foo/?`, "/", "/foo", "/"},
		{`^/service/([^/]+)(/.*)$`, `\2/instance/\1`, "/service/foo/v1/api", "/v1/api/instance/foo"},
		{"o", "0", "/foo/boo", "/f00/b00"},
		{"^/x", `/a\\b$1`, "/x", `/a\b$1`},
		{"^/x", `/\0\0`, "/x", "//x/x"},
	} {
		rw, err := router.ConvertPathRewrite(regexRewrite(tc.pattern, tc.subst))
		if err != nil {
			t.Fatalf("%q %q: %v", tc.pattern, tc.subst, err)
		}
		if got := rw.Apply(tc.path); got != tc.want {
			t.Errorf("%q -> %q on %s = %q, want %q", tc.pattern, tc.subst, tc.path, got, tc.want)
		}
	}
	for _, tc := range []struct{ pattern, subst, wantErr string }{
		{"(", "/", "pattern"},
		{"^/(a)", `\2`, "capture group"},
		{"^/", `\x`, "not a capture group"},
		{"^/", `a\`, "ends it"},
	} {
		_, err := router.ConvertPathRewrite(regexRewrite(tc.pattern, tc.subst))
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q %q: error %v, want one about %q", tc.pattern, tc.subst, err, tc.wantErr)
		}
	}
	ra := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}, PrefixRewrite: "/a", RegexRewrite: regexRewrite("^/", "/")}
	if _, err := router.ConvertRouteAction(ra, httpFilters); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("prefix_rewrite with regex_rewrite: error %v, want a refusal", err)
	}
}

// TestRegexRewriteRequests: a route's regex_rewrite changes the path the upstream sees
// and a redirect's the Location's; the query string is kept.
func TestRegexRewriteRequests(t *testing.T) {
	cp := startControlPlane(t)
	b := startBackend(t, "app")
	rewrite := func(r *routev3.Route, rs *matcherv3.RegexMatchAndSubstitute) *routev3.Route {
		return withAction(r, func(a *routev3.RouteAction) { a.RegexRewrite = rs })
	}
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			rewrite(toCluster("app", separatedMatch("/strip")), regexRewrite(`^/strip/?`, "/")),
			rewrite(toCluster("app", prefixMatch("/service/")), regexRewrite(`^/service/([^/]+)(/.*)$`, `\2/instance/\1`)),
			&routev3.Route{Match: separatedMatch("/moved"), Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{
				PathRewriteSpecifier: &routev3.RedirectAction_RegexRewrite{RegexRewrite: regexRewrite(`^/moved/?`, "/")},
				ResponseCode:         routev3.RedirectAction_FOUND,
			}}},
		))},
		clusters:  []*clusterv3.Cluster{edsCluster("app")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("app", b.addr())},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for target, want := range map[string]string{
		"/strip/a/b?x=1":          "/a/b?x=1",
		"/strip":                  "/",
		"/service/foo/v1/api?y=2": "/v1/api/instance/foo?y=2",
	} {
		if r := get(t, c, p.httpURL(t, target), "rw.example.com", nil); r.Status != 200 || r.Path != want {
			t.Errorf("%s: %d, the backend saw %q, want %q", target, r.Status, r.Path, want)
		}
	}
	for target, want := range map[string]string{
		"/moved/a?x=1": "http://rw.example.com/a?x=1",
		"/moved":       "http://rw.example.com/",
	} {
		if r := get(t, c, p.httpURL(t, target), "rw.example.com", nil); r.Status != 302 || r.Header.Get("Location") != want {
			t.Errorf("%s: %d Location %q, want 302 %q", target, r.Status, r.Header.Get("Location"), want)
		}
	}
}

// BenchmarkPathRewrite: what a request on a route with a regex_rewrite pays, beside a
// prefix_rewrite's string concatenation.
func BenchmarkPathRewrite(b *testing.B) {
	rw, err := router.ConvertPathRewrite(regexRewrite(`^/foo/?`, "/"))
	if err != nil {
		b.Fatal(err)
	}
	prefix, path := "/", "/foo/bar/baz"
	var out string
	b.Run("regex_rewrite", func(b *testing.B) {
		for b.Loop() {
			out = rw.Apply(path)
		}
	})
	b.Run("prefix_rewrite", func(b *testing.B) {
		for b.Loop() {
			out = prefix + path[len("/foo/"):]
		}
	})
	runtime.KeepAlive(out)
}
