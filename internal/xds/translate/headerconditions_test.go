package translate

import (
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/portico-dev/portico/internal/dag"
)

// TestHTTPProxyHeaderOperators: each HTTPProxy header operator, as the graph holds it,
// becomes the Envoy matcher that gives Contour's meaning on an absent header: no
// treat_missing_header_as_empty unless the condition asks for it (so notexact and
// notcontains fail on an absent header, as in Contour), and notpresent a presence check
// that holds exactly when the header is absent (Contour writes present_match: true with
// invert_match, which Envoy answers the same). Translate validates every resource
// (ValidateAll); each matcher is validated on its own too.
func TestHTTPProxyHeaderOperators(t *testing.T) {
	exact := func(v string) *routev3.HeaderMatcher_StringMatch {
		return strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}})
	}
	contains := func(v string) *routev3.HeaderMatcher_StringMatch {
		return strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: v}})
	}
	tests := []struct {
		operator string
		cond     dag.HeaderMatch
		want     *routev3.HeaderMatcher
	}{
		{"present", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchPresent},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}},
		{"notpresent", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchPresent, Invert: true},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}}},
		{"exact", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchExact, Value: "v"},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: exact("v")}},
		{"notexact", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchExact, Value: "v", Invert: true},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: exact("v"), InvertMatch: true}},
		{"notexact, treatMissingAsEmpty", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchExact, Value: "v", Invert: true, TreatMissingAsEmpty: true},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: exact("v"), InvertMatch: true, TreatMissingHeaderAsEmpty: true}},
		{"contains", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchContains, Value: "v"},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: contains("v")}},
		{"notcontains", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchContains, Value: "v", Invert: true},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: contains("v"), InvertMatch: true}},
		{"notcontains, treatMissingAsEmpty", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchContains, Value: "v", Invert: true, TreatMissingAsEmpty: true},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: contains("v"), InvertMatch: true, TreatMissingHeaderAsEmpty: true}},
		{"regex, treatMissingAsEmpty", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchRegex, Value: "(|none)", TreatMissingAsEmpty: true},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "(|none)"}}}), TreatMissingHeaderAsEmpty: true}},
		{"exact, ignoreCase", dag.HeaderMatch{Name: "x-a", Kind: dag.MatchExact, Value: "v", IgnoreCase: true, Invert: true},
			&routev3.HeaderMatcher{Name: "x-a", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "v"}, IgnoreCase: true}), InvertMatch: true}},
	}
	for _, tc := range tests {
		t.Run(tc.operator, func(t *testing.T) {
			r := route(dag.PathPrefix, "/", testCluster("team", "web", 80))
			r.Headers = []dag.HeaderMatch{tc.cond}
			got := translateHost(t, Options{}, r)
			if len(got) != 1 || len(got[0].Match.Headers) != 1 {
				t.Fatalf("got %d routes, want 1 with one header matcher", len(got))
			}
			m := got[0].Match.Headers[0]
			if err := m.ValidateAll(); err != nil {
				t.Errorf("ValidateAll: %v", err)
			}
			if diff := cmp.Diff(tc.want, m, protocmp.Transform()); diff != "" {
				t.Errorf("header matcher (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHostRewriteFromHeader: a route whose Host comes from a request header (an
// HTTPProxy route's Host: %REQ(name)%) gets Envoy's host_rewrite_header, which Contour
// emits for it; a literal Host wins. Translate validates every resource (ValidateAll).
func TestHostRewriteFromHeader(t *testing.T) {
	r := route(dag.PathPrefix, "/", testCluster("team", "web", 80))
	r.HostRewriteHeader = "X-Rewrite"
	r.RequestHeaders = &dag.HeadersPolicy{Set: []dag.HeaderValue{{Name: "X-Client", Value: "%DOWNSTREAM_PEER_SUBJECT% %REQ(Host)%"}}}
	got := translateHost(t, Options{}, r)[0].GetRoute()
	if diff := cmp.Diff(&routev3.RouteAction_HostRewriteHeader{HostRewriteHeader: "X-Rewrite"}, got.GetHostRewriteSpecifier(), protocmp.Transform()); diff != "" {
		t.Errorf("host rewrite (-want +got):\n%s", diff)
	}
	r.HostRewrite = "literal.example.com"
	got = translateHost(t, Options{}, r)[0].GetRoute()
	if diff := cmp.Diff(&routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "literal.example.com"}, got.GetHostRewriteSpecifier(), protocmp.Transform()); diff != "" {
		t.Errorf("host rewrite (-want +got):\n%s", diff)
	}
}
