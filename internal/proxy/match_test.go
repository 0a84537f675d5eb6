package proxy

import (
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/proxy/listener"
	"github.com/portico-dev/portico/internal/proxy/router"
)

func TestSelectVirtualHost(t *testing.T) {
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{
		{Name: "exact", Domains: []string{"foo.example.com"}},
		{Name: "short-wild", Domains: []string{"*.com"}},
		{Name: "long-wild", Domains: []string{"*.example.com"}},
		{Name: "prefix-wild", Domains: []string{"api.*"}},
		{Name: "any", Domains: []string{"*"}},
	}}
	table, err := router.ConvertRouteConfig(rc, httpFilters)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, host := range []string{"foo.example.com", "FOO.EXAMPLE.COM", "bar.example.com", "a.b.example.com", "example.com", "x.com", "api.internal", "other"} {
		if vh := table.SelectVirtualHost(host); vh != nil {
			got[host] = vh.Name
		}
	}
	want := map[string]string{
		"foo.example.com": "exact", "FOO.EXAMPLE.COM": "exact",
		"bar.example.com": "long-wild", "a.b.example.com": "long-wild", // suffix wildcards cover several labels
		"example.com": "short-wild", "x.com": "short-wild",
		"api.internal": "prefix-wild", "other": "any",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("virtual host selection (-want +got):\n%s", diff)
	}
	noCatchAll, _ := router.ConvertRouteConfig(&routev3.RouteConfiguration{Name: "x", VirtualHosts: []*routev3.VirtualHost{
		{Name: "only", Domains: []string{"only.example.com"}},
	}}, httpFilters)
	if vh := noCatchAll.SelectVirtualHost("else.example.com"); vh != nil {
		t.Errorf("got %q, want no virtual host", vh.Name)
	}
}

func TestPathMatchAndRewrite(t *testing.T) {
	tests := []struct {
		name          string
		match         *routev3.RouteMatch
		path          string
		matches       bool
		rewriteResult string // with prefix_rewrite "/new"
	}{
		{"prefix", prefixMatch("/api"), "/api/v1", true, "/new/v1"},
		{"prefix is a string prefix", prefixMatch("/api"), "/apis", true, "/news"},
		{"separated prefix exact", separatedMatch("/api"), "/api", true, "/new"},
		{"separated prefix element", separatedMatch("/api"), "/api/x", true, "/new/x"},
		{"separated prefix not a string prefix", separatedMatch("/api"), "/apis", false, ""},
		{"exact", exactMatch("/api"), "/api", true, "/new"},
		{"exact mismatch", exactMatch("/api"), "/api/", false, ""},
		{"regex", regexMatch("/v[0-9]/.*"), "/v1/x", true, "/new"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := router.ConvertRouteMatch(tc.match)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.PathMatches(tc.path); got != tc.matches {
				t.Fatalf("pathMatches(%q) = %v, want %v", tc.path, got, tc.matches)
			}
			if tc.matches {
				if got := "/new" + tc.path[m.MatchedPrefixLen(tc.path):]; got != tc.rewriteResult {
					t.Errorf("rewritten = %q, want %q", got, tc.rewriteResult)
				}
			}
		})
	}
}

func TestSelectChain(t *testing.T) {
	mk := func(keys ...string) *listener.Config {
		lc := &listener.Config{Chains: map[string]*listener.FilterChain{}}
		for _, k := range keys {
			lc.Chains[k] = &listener.FilterChain{Routes: &router.RouteTable{Name: k}}
		}
		return lc
	}
	tests := []struct {
		chains []string
		sni    string
		want   string // route name of the chosen chain, or "-" for none
	}{
		{[]string{"a.example.com", "*.example.com"}, "a.example.com", "a.example.com"},
		{[]string{"a.example.com", "*.example.com"}, "A.Example.com", "a.example.com"},
		{[]string{"a.example.com", "*.example.com"}, "b.example.com", "*.example.com"},
		{[]string{"*.b.example.com", "*.example.com"}, "x.b.example.com", "*.b.example.com"},
		{[]string{"*.example.com"}, "x.y.example.com", "*.example.com"},
		{[]string{"*.example.com"}, "example.com", "-"},
		{[]string{"a.example.com"}, "", "-"},
		{[]string{"a.example.com", ""}, "zzz", ""},
	}
	for _, tc := range tests {
		c, _ := mk(tc.chains...).SelectChain(tc.sni)
		got := "-"
		if c != nil {
			got = c.Routes.Name
		}
		if got != tc.want {
			t.Errorf("chains %v SNI %q: got %q, want %q", tc.chains, tc.sni, got, tc.want)
		}
	}
}

// TestConvertRejects checks that what the proxy cannot honour is refused with
// a reason naming the problem (the NACK error_detail).
func TestConvertRejects(t *testing.T) {
	route := func(m *routev3.RouteMatch, mutate func(r *routev3.Route)) *routev3.RouteConfiguration {
		r := toCluster("c", m)
		if mutate != nil {
			mutate(r)
		}
		return routeConfig("rc", vhost("*", r))
	}
	tests := []struct {
		name string
		rc   *routev3.RouteConfiguration
		want string
	}{
		{"connect matcher", route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_ConnectMatcher_{ConnectMatcher: &routev3.RouteMatch_ConnectMatcher{}}}, nil), "path specifier"},
		{"bad regex", route(regexMatch("(unclosed"), nil), "safe_regex"},
		{"query parameter regex", route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, QueryParameters: []*routev3.QueryParameterMatcher{{
			Name: "q", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "(x"}}}},
		}}}, nil), `query_parameters "q": safe_regex`},
		{"cookies matcher", route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Cookies: []*routev3.CookieMatcher{{Name: "c"}}}, nil), "cookies"},
		{"regex rewrite naming a missing group", route(prefixMatch("/"), func(r *routev3.Route) {
			r.GetRoute().RegexRewrite = &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: "x"}, Substitution: `\1`}
		}), "regex_rewrite: substitution"},
		{"path rewrite policy", route(prefixMatch("/"), func(r *routev3.Route) {
			r.GetRoute().PathRewritePolicy = &corev3.TypedExtensionConfig{Name: "envoy.path.rewrite.uri_template"}
		}), "path_rewrite_policy"},
		{"retry policy", route(prefixMatch("/"), func(r *routev3.Route) {
			r.GetRoute().RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx,envoy-ratelimited"}
		}), `retry_on "envoy-ratelimited"`},
		{"cluster header", route(prefixMatch("/"), func(r *routev3.Route) {
			r.GetRoute().ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x-cluster"}
		}), "cluster specifier"},
		{"header mutation of host", route(prefixMatch("/"), func(r *routev3.Route) { r.RequestHeadersToRemove = []string{"Host"} }), `request_headers_to_remove "Host": :-prefixed or host headers may not be removed`},
		{"duplicate domain", routeConfig("rc", vhost("a.com"), vhost("A.com")), "is in virtual hosts"},
		{"middle wildcard", routeConfig("rc", vhost("a.*.com")), "wildcard"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := router.ConvertRouteConfig(tc.rc, httpFilters)
			if err == nil {
				t.Fatal("accepted, want a rejection")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// A runtime_fraction route matches its share of the requests the rest of its match
// matches, drawn per request.
func TestRuntimeFraction(t *testing.T) {
	ri := &router.RequestInfo{Method: "GET", Path: "/p", Header: http.Header{}}
	for _, tc := range []struct {
		name     string
		fp       *typev3.FractionalPercent
		min, max int // of 1000 requests
	}{
		{"none", &typev3.FractionalPercent{Numerator: 0, Denominator: typev3.FractionalPercent_MILLION}, 0, 0},
		{"all", &typev3.FractionalPercent{Numerator: 100}, 1000, 1000},
		{"a quarter", &typev3.FractionalPercent{Numerator: 2500, Denominator: typev3.FractionalPercent_TEN_THOUSAND}, 150, 350},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := router.ConvertRouteMatch(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
				RuntimeFraction: &corev3.RuntimeFractionalPercent{DefaultValue: tc.fp}})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for range 1000 {
				if m.Matches(ri) {
					n++
				}
			}
			// The bounds of "a quarter" are over 7 standard deviations wide.
			if n < tc.min || n > tc.max {
				t.Errorf("%d of 1000 matched, want %d to %d", n, tc.min, tc.max)
			}
		})
	}
}

// BenchmarkRouteSelection measures the proxy's route selection on a virtual host of
// 20 routes with path and header conditions, the request matching the last.
func BenchmarkRouteSelection(b *testing.B) {
	vh := router.VirtualHost{VhostDef: &router.VhostDef{}}
	for i := range 20 {
		m, err := router.ConvertRouteMatch(&routev3.RouteMatch{
			PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/app" + strings.Repeat("x", i)},
			Headers: []*routev3.HeaderMatcher{{Name: "x-env", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
				StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "canary"}}}}},
		})
		if err != nil {
			b.Fatal(err)
		}
		vh.Routes = append(vh.Routes, &router.Route{Match: m})
	}
	ri := &router.RequestInfo{Method: "GET", Path: "/app" + strings.Repeat("x", 19) + "/y", Header: http.Header{"X-Env": {"canary"}}}
	for b.Loop() {
		if vh.SelectRoute(ri) == nil {
			b.Fatal("no route")
		}
	}
}
