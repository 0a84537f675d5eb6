package translate

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// The HTTPProxy shapes of docs/dev/xds-contract.md ("HTTPProxy shapes"), one graph field
// at a time. Translate validates every resource and every packed typed config, so each
// successful translation below is also a ValidateAll check of that shape.

var httpProxySource = dag.ObjectRef{Kind: "HTTPProxy", Namespace: "team", Name: "app"}

func strMatch(sm *matcherv3.StringMatcher) *routev3.HeaderMatcher_StringMatch {
	return &routev3.HeaderMatcher_StringMatch{StringMatch: sm}
}

func TestRegexPathHeaderAndQueryConditions(t *testing.T) {
	web := testCluster("team", "web", 80)
	r := route(dag.PathRegex, "/v[0-9]+/.*", web)
	r.Headers = []dag.HeaderMatch{
		{Name: "x-present", Kind: dag.MatchPresent},
		{Name: "x-absent", Kind: dag.MatchPresent, Invert: true},
		{Name: "x-exact", Kind: dag.MatchExact, Value: "a"},
		{Name: "x-notexact", Kind: dag.MatchExact, Value: "b", Invert: true, TreatMissingAsEmpty: true},
		{Name: "x-prefix", Kind: dag.MatchPrefix, Value: "Pre", IgnoreCase: true},
		{Name: "x-suffix", Kind: dag.MatchSuffix, Value: "fix"},
		{Name: "x-notcontains", Kind: dag.MatchContains, Value: "bad", Invert: true},
		{Name: "x-regex", Kind: dag.MatchRegex, Value: "^a.*z$"},
		{Name: "x-iregex", Kind: dag.MatchRegex, Value: "ab+c", IgnoreCase: true},
	}
	r.Query = []dag.QueryMatch{
		{Name: "debug", Kind: dag.MatchPresent},
		{Name: "user", Kind: dag.MatchExact, Value: "Alice", IgnoreCase: true},
		{Name: "p", Kind: dag.MatchPrefix, Value: "x"},
		{Name: "s", Kind: dag.MatchSuffix, Value: "y"},
		{Name: "c", Kind: dag.MatchContains, Value: "z"},
		{Name: "re", Kind: dag.MatchRegex, Value: "[0-9]+", IgnoreCase: true},
	}
	got := translateHost(t, Options{}, r)
	if len(got) != 1 {
		t.Fatalf("got %d routes, want 1", len(got))
	}
	want := &routev3.RouteMatch{
		PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/v[0-9]+/.*"}},
		Headers: []*routev3.HeaderMatcher{
			{Name: "x-present", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}},
			{Name: "x-absent", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}},
			{Name: "x-exact", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "a"}})},
			{Name: "x-notexact", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "b"}}), InvertMatch: true, TreatMissingHeaderAsEmpty: true},
			{Name: "x-prefix", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "Pre"}, IgnoreCase: true})},
			{Name: "x-suffix", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "fix"}})},
			{Name: "x-notcontains", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "bad"}}), InvertMatch: true},
			{Name: "x-regex", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "^a.*z$"}}})},
			// Envoy refuses ignore_case with safe_regex: the regex carries the flag.
			{Name: "x-iregex", HeaderMatchSpecifier: strMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "(?i)ab+c"}}})},
		},
		QueryParameters: []*routev3.QueryParameterMatcher{
			{Name: "debug", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}},
			{Name: "user", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "Alice"}, IgnoreCase: true}}},
			{Name: "p", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "x"}}}},
			{Name: "s", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "y"}}}},
			{Name: "c", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "z"}}}},
			{Name: "re", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "(?i)[0-9]+"}}}}},
		},
	}
	if diff := cmp.Diff(want, got[0].Match, protocmp.Transform()); diff != "" {
		t.Errorf("route match (-want +got):\n%s", diff)
	}
	if name := got[0].Name; !strings.HasPrefix(name, "regex:/v[0-9]+/.*?h=") || len(name) != len("regex:/v[0-9]+/.*?h=")+8 {
		t.Errorf("route name = %q, want regex:<path>?h=<8 hex digits>", name)
	}
}

// A wildcard host's routes keep their own conditions and add the one-label Host condition
// after them.
func TestConditionsOnWildcardHostRoutes(t *testing.T) {
	r := route(dag.PathPrefix, "/", testCluster("team", "web", 80))
	r.Headers = []dag.HeaderMatch{{Name: "x-a", Kind: dag.MatchExact, Value: "1"}}
	res, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{{Name: "*.foo.com", Routes: []*dag.Route{r}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range res.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[0].Routes[0].Match.Headers {
		names = append(names, h.Name)
	}
	if diff := cmp.Diff([]string{"x-a", ":authority"}, names); diff != "" {
		t.Errorf("header conditions (-want +got):\n%s", diff)
	}
}

// Two routes of one path that differ in their conditions get different names, each
// stable: the hash does not depend on the order of the conditions.
func TestRouteNamesOfConditionalRoutes(t *testing.T) {
	web := testCluster("team", "web", 80)
	withConds := func(kind dag.PathMatchKind, path string, hs []dag.HeaderMatch, qs []dag.QueryMatch) *dag.Route {
		r := route(kind, path, web)
		r.Source = httpProxySource
		r.Headers, r.Query = hs, qs
		return r
	}
	a := dag.HeaderMatch{Name: "x-a", Kind: dag.MatchExact, Value: "1"}
	b := dag.HeaderMatch{Name: "x-b", Kind: dag.MatchPresent}
	q := dag.QueryMatch{Name: "q", Kind: dag.MatchExact, Value: "1"}
	got := translateHost(t, Options{},
		withConds(dag.PathPrefix, "/api", []dag.HeaderMatch{a}, nil),
		withConds(dag.PathPrefix, "/api", []dag.HeaderMatch{b}, nil),
		withConds(dag.PathPrefix, "/api", []dag.HeaderMatch{a, b}, nil),
		withConds(dag.PathPrefix, "/api", []dag.HeaderMatch{b, a}, []dag.QueryMatch{q}),
		withConds(dag.PathPrefix, "/api", nil, []dag.QueryMatch{q}),
		withConds(dag.PathPrefix, "/api", nil, nil),
		withConds(dag.PathRegex, "/api", nil, nil),
		withConds(dag.PathExact, "/api", nil, nil),
	)
	var names []string
	seen := map[string]bool{}
	for _, r := range got {
		names = append(names, r.Name)
		if seen[r.Name] || strings.Contains(r.Name, "#") {
			t.Errorf("route name %q is not unique by itself", r.Name)
		}
		seen[r.Name] = true
	}
	for i, prefix := range []string{"httpproxy/team/app:prefix:/api?h=", "httpproxy/team/app:prefix:/api?h=", "httpproxy/team/app:prefix:/api?h=", "httpproxy/team/app:prefix:/api?h=", "httpproxy/team/app:prefix:/api?h="} {
		if !strings.HasPrefix(names[i], prefix) || len(names[i]) != len(prefix)+8 {
			t.Errorf("route %d name = %q, want %s<8 hex digits>", i, names[i], prefix)
		}
	}
	if diff := cmp.Diff([]string{"httpproxy/team/app:prefix:/api", "httpproxy/team/app:regex:/api", "httpproxy/team/app:exact:/api"}, names[5:]); diff != "" {
		t.Errorf("unconditional route names (-want +got):\n%s", diff)
	}
	// Same conditions in another order: the same name.
	again := translateHost(t, Options{}, withConds(dag.PathPrefix, "/api", []dag.HeaderMatch{b, a}, nil))
	if again[0].Name != names[2] {
		t.Errorf("conditions in another order named %q, want %q", again[0].Name, names[2])
	}
	// A pinned value: route names label metrics, so a change of the hash input that renames
	// every conditional route must be deliberate.
	if want := "httpproxy/team/app:prefix:/api?h=cd3bcab1"; names[0] != want {
		t.Errorf("route name = %q, want %q", names[0], want)
	}
}

// routeName writes its names without fmt; they label metrics, so they must stay what the
// fmt version made, byte for byte (this is that version).
func TestRouteNamesAreTheFmtOnes(t *testing.T) {
	fmtHash := func(r *dag.Route) uint32 {
		lines := make([]string, 0, len(r.Headers)+len(r.Query))
		for _, m := range r.Headers {
			lines = append(lines, fmt.Sprintf("header %q %s %q invert=%t ignorecase=%t missingempty=%t",
				m.Name, matchKindName(m.Kind), m.Value, m.Invert, m.IgnoreCase, m.TreatMissingAsEmpty))
		}
		for _, m := range r.Query {
			lines = append(lines, fmt.Sprintf("query %q %s %q ignorecase=%t", m.Name, matchKindName(m.Kind), m.Value, m.IgnoreCase))
		}
		slices.Sort(lines)
		h := fnv.New32a()
		for _, l := range lines {
			_, _ = h.Write([]byte(l))
			_, _ = h.Write([]byte{'\n'})
		}
		return h.Sum32()
	}
	fmtName := func(r *dag.Route) string {
		kind := map[dag.PathMatchKind]string{dag.PathExact: "exact", dag.PathRegex: "regex"}[r.Path.Kind]
		if kind == "" {
			kind = "prefix"
		}
		name := kind + ":" + r.Path.Value
		if len(r.Headers) > 0 || len(r.Query) > 0 {
			name += fmt.Sprintf("?h=%08x", fmtHash(r))
		}
		object := ""
		if src := r.Source; src.Kind != "" {
			object = strings.ToLower(src.Kind) + "/" + src.Namespace + "/" + src.Name + ":"
			name = object + name
		}
		if len(name) > maxRouteNameLen {
			h := fnv.New32a()
			_, _ = h.Write([]byte(name))
			cut := max(maxRouteNameLen-9, len(object))
			for cut > 0 && !utf8.RuneStart(name[cut]) {
				cut--
			}
			name = fmt.Sprintf("%s~%08x", name[:cut], h.Sum32())
		}
		return name
	}
	long := "/" + strings.Repeat("päth/", 50)
	odd := []string{"", "1", `a "quoted" \ value`, "tab\there", "ünïcode", "\xff\xfe", strings.Repeat("v", 300)}
	var routes []*dag.Route
	for _, kind := range []dag.PathMatchKind{dag.PathPrefix, dag.PathStringPrefix, dag.PathExact, dag.PathRegex} {
		for _, path := range []string{"/", "/api", long} {
			for _, src := range []dag.ObjectRef{{}, httpProxySource, {Kind: "IngressRoute", Namespace: "ns", Name: "Mixed-Case"},
				{Kind: "HTTPProxy", Namespace: strings.Repeat("n", 63), Name: strings.Repeat("long.", 50) + "name"}} {
				r := &dag.Route{Path: dag.PathMatch{Kind: kind, Value: path}, Source: src}
				routes = append(routes, r)
				for i, v := range odd {
					h := dag.HeaderMatch{Name: "x-" + v, Kind: dag.StringMatchKind(i % 6), Value: v, Invert: i%2 == 0, IgnoreCase: i%3 == 0, TreatMissingAsEmpty: i%4 == 0}
					q := dag.QueryMatch{Name: v, Kind: dag.StringMatchKind(i % 6), Value: v, IgnoreCase: i%2 == 1}
					routes = append(routes,
						&dag.Route{Path: r.Path, Source: src, Headers: []dag.HeaderMatch{h}},
						&dag.Route{Path: r.Path, Source: src, Query: []dag.QueryMatch{q}},
						&dag.Route{Path: r.Path, Source: src, Headers: []dag.HeaderMatch{h, {Name: "x-b", Kind: dag.MatchPresent}}, Query: []dag.QueryMatch{q}},
					)
				}
			}
		}
	}
	for _, r := range routes {
		if got, want := routeName(r), fmtName(r); got != want {
			t.Errorf("route name %q, want %q", got, want)
		}
	}
}

func TestHeaderPolicies(t *testing.T) {
	set := func(kv ...string) []dag.HeaderValue {
		var out []dag.HeaderValue
		for i := 0; i < len(kv); i += 2 {
			out = append(out, dag.HeaderValue{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	overwrite := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
	}
	stable, canary := testCluster("team", "stable", 80), testCluster("team", "canary", 80)

	t.Run("route and weighted clusters", func(t *testing.T) {
		r := &dag.Route{
			Path:            dag.PathMatch{Kind: dag.PathPrefix, Value: "/"},
			RequestHeaders:  &dag.HeadersPolicy{Set: set("X-Req", "1", "Host", "internal.example.com"), Remove: []string{"X-Secret"}},
			ResponseHeaders: &dag.HeadersPolicy{Set: set("X-Resp", "2"), Remove: []string{"Server-Timing"}},
			Clusters: []*dag.WeightedCluster{
				{Cluster: stable, Weight: 90, RequestHeaders: &dag.HeadersPolicy{Set: set("X-Version", "stable")}},
				{Cluster: canary, Weight: 10,
					RequestHeaders:  &dag.HeadersPolicy{Set: set("X-Version", "canary", "Host", "canary.internal"), Remove: []string{"X-Debug"}},
					ResponseHeaders: &dag.HeadersPolicy{Set: set("X-Canary", "yes"), Remove: []string{"X-Powered-By"}}},
			},
		}
		got := translateHost(t, Options{}, r)[0]
		want := &routev3.Route{
			Name:                    "prefix:/",
			Match:                   prefixMatch("/"),
			RequestHeadersToAdd:     []*corev3.HeaderValueOption{overwrite("X-Req", "1")},
			RequestHeadersToRemove:  []string{"X-Secret"},
			ResponseHeadersToAdd:    []*corev3.HeaderValueOption{overwrite("X-Resp", "2")},
			ResponseHeadersToRemove: []string{"Server-Timing"},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
					{Name: "team/stable/80", Weight: wrapperspb.UInt32(90), RequestHeadersToAdd: []*corev3.HeaderValueOption{overwrite("X-Version", "stable")}},
					{
						Name: "team/canary/80", Weight: wrapperspb.UInt32(10),
						RequestHeadersToAdd:     []*corev3.HeaderValueOption{overwrite("X-Version", "canary")},
						RequestHeadersToRemove:  []string{"X-Debug"},
						ResponseHeadersToAdd:    []*corev3.HeaderValueOption{overwrite("X-Canary", "yes")},
						ResponseHeadersToRemove: []string{"X-Powered-By"},
						// Envoy refuses "host" in request_headers_to_add: Host is a rewrite.
						HostRewriteSpecifier: &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: "canary.internal"},
					},
				}}},
				HostRewriteSpecifier: &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: "internal.example.com"},
			}},
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("route (-want +got):\n%s", diff)
		}
	})

	t.Run("one cluster with a policy is a weighted cluster of one", func(t *testing.T) {
		for _, weight := range []uint32{0, 1, 7} {
			r := route(dag.PathPrefix, "/", stable)
			r.Clusters[0].Weight = weight
			r.Clusters[0].ResponseHeaders = &dag.HeadersPolicy{Remove: []string{"X-Internal"}}
			got := translateHost(t, Options{}, r)[0].GetRoute()
			want := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: []*routev3.WeightedCluster_ClusterWeight{
				{Name: "team/stable/80", Weight: wrapperspb.UInt32(max(weight, 1)), ResponseHeadersToRemove: []string{"X-Internal"}},
			}}}}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("weight %d: route action (-want +got):\n%s", weight, diff)
			}
		}
		// An empty policy changes nothing: the cluster is named directly.
		r := route(dag.PathPrefix, "/", stable)
		r.Clusters[0].RequestHeaders = &dag.HeadersPolicy{}
		if got := translateHost(t, Options{}, r)[0].GetRoute().GetCluster(); got != "team/stable/80" {
			t.Errorf("cluster = %q, want team/stable/80 named directly", got)
		}
	})

	t.Run("HostRewrite wins over a Host header", func(t *testing.T) {
		r := route(dag.PathPrefix, "/", stable)
		r.HostRewrite = "rewritten.example.com"
		r.RequestHeaders = &dag.HeadersPolicy{Set: set("Host", "header.example.com")}
		got := translateHost(t, Options{}, r)[0]
		if h := got.GetRoute().GetHostRewriteLiteral(); h != "rewritten.example.com" {
			t.Errorf("host_rewrite_literal = %q, want rewritten.example.com", h)
		}
		if got.RequestHeadersToAdd != nil {
			t.Errorf("request_headers_to_add = %v, want none", got.RequestHeadersToAdd)
		}
	})

	// Envoy refuses a whole route configuration that adds or removes Host or a
	// pseudo-header; the builder must not produce them, and the translator leaves them out.
	t.Run("headers Envoy may not change are left out", func(t *testing.T) {
		r := route(dag.PathPrefix, "/", stable)
		r.RequestHeaders = &dag.HeadersPolicy{Set: set(":path", "/x", "X-Ok", "1"), Remove: []string{"Host", ":authority", "X-Gone"}}
		r.ResponseHeaders = &dag.HeadersPolicy{Set: set("Host", "x", "X-Ok", "2"), Remove: []string{"host"}}
		got := translateHost(t, Options{}, r)[0]
		want := &routev3.Route{
			Name:                   "prefix:/",
			Match:                  prefixMatch("/"),
			RequestHeadersToAdd:    []*corev3.HeaderValueOption{overwrite("X-Ok", "1")},
			RequestHeadersToRemove: []string{"X-Gone"},
			ResponseHeadersToAdd:   []*corev3.HeaderValueOption{overwrite("X-Ok", "2")},
			Action:                 &routev3.Route_Route{Route: toCluster("team/stable/80")},
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("route (-want +got):\n%s", diff)
		}
	})

	t.Run("header policies of a route that answers itself", func(t *testing.T) {
		r := &dag.Route{
			Path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}, DirectStatus: 200, DirectBody: "ok",
			ResponseHeaders: &dag.HeadersPolicy{Set: set("Content-Type", "text/plain")},
			RequestHeaders:  &dag.HeadersPolicy{Set: set("Host", "ignored")},
		}
		got := translateHost(t, Options{}, r)[0]
		if diff := cmp.Diff([]*corev3.HeaderValueOption{overwrite("Content-Type", "text/plain")}, got.ResponseHeadersToAdd, protocmp.Transform()); diff != "" {
			t.Errorf("response_headers_to_add (-want +got):\n%s", diff)
		}
		if got.RequestHeadersToAdd != nil {
			t.Errorf("request_headers_to_add = %v, want none", got.RequestHeadersToAdd)
		}
	})
}

func TestWebsocketRoute(t *testing.T) {
	r := route(dag.PathPrefix, "/ws", testCluster("team", "chat", 80))
	r.Websocket = true
	got := translateHost(t, Options{}, r)[0].GetRoute()
	want := &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "team/chat/80"},
		UpgradeConfigs:   []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "websocket"}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("route action (-want +got):\n%s", diff)
	}
}

func TestRedirectRoutes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		redirect dag.Redirect
		want     *routev3.RedirectAction
	}{
		{"everything kept, 301", dag.Redirect{StatusCode: 301}, &routev3.RedirectAction{ResponseCode: routev3.RedirectAction_MOVED_PERMANENTLY}},
		{"default status is 301", dag.Redirect{Hostname: "example.org"}, &routev3.RedirectAction{HostRedirect: "example.org", ResponseCode: routev3.RedirectAction_MOVED_PERMANENTLY}},
		{"https, host, port, path, 302", dag.Redirect{Scheme: "https", Hostname: "example.org", Port: 8443, Path: "/new", StatusCode: 302}, &routev3.RedirectAction{
			SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
			HostRedirect:           "example.org",
			PortRedirect:           8443,
			PathRewriteSpecifier:   &routev3.RedirectAction_PathRedirect{PathRedirect: "/new"},
			ResponseCode:           routev3.RedirectAction_FOUND,
		}},
		{"http scheme and prefix", dag.Redirect{Scheme: "http", Prefix: "/v2", StatusCode: 301}, &routev3.RedirectAction{
			SchemeRewriteSpecifier: &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "http"},
			PathRewriteSpecifier:   &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: "/v2"},
			ResponseCode:           routev3.RedirectAction_MOVED_PERMANENTLY,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := tc.redirect
			got := translateHost(t, Options{HTTPSRedirectPort: 9999}, &dag.Route{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/old"}, Redirect: &rd})
			want := []*routev3.Route{{
				Name:   "prefix:/old",
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_PathSeparatedPrefix{PathSeparatedPrefix: "/old"}},
				Action: &routev3.Route_Redirect{Redirect: tc.want},
			}}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDirectResponseBody(t *testing.T) {
	got := translateHost(t, Options{},
		&dag.Route{Path: dag.PathMatch{Kind: dag.PathExact, Value: "/teapot"}, DirectStatus: 418, DirectBody: "short and stout\n"},
		&dag.Route{Path: dag.PathMatch{Kind: dag.PathExact, Value: "/empty"}, DirectStatus: 204},
	)
	want := []*routev3.DirectResponseAction{
		{Status: 418, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "short and stout\n"}}},
		{Status: 204},
	}
	for i := range want {
		if diff := cmp.Diff(want[i], got[i].GetDirectResponse(), protocmp.Transform()); diff != "" {
			t.Errorf("route %d direct response (-want +got):\n%s", i, diff)
		}
	}
}

func TestRouteHashPolicies(t *testing.T) {
	ring := testCluster("team", "web", 80)
	ring.LoadBalancer = dag.LBRingHash
	r := route(dag.PathPrefix, "/", ring)
	r.HashPolicies = []dag.HashPolicy{
		{Header: "x-user"},
		{QueryParameter: "session", Terminal: true},
		{SourceIP: true},
		{Cookie: "affinity", CookieTTL: time.Hour, CookiePath: "/app"},
		{Cookie: "plain"},
		{Cookie: "session", CookieGenerate: true, CookiePath: "/"},
		{}, // nothing to hash on: left out
	}
	got := translateHost(t, Options{}, r)[0].GetRoute().GetHashPolicy()
	// The route's own policies replace the client-address hash of a ring-hash cluster.
	want := []*routev3.RouteAction_HashPolicy{
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: "x-user"}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: "session"}}, Terminal: true},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "affinity", Ttl: durationpb.New(time.Hour), Path: "/app"}}},
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "plain"}}},
		// A generated session cookie: ttl 0s is what tells Envoy to create it.
		{PolicySpecifier: &routev3.RouteAction_HashPolicy_Cookie_{Cookie: &routev3.RouteAction_HashPolicy_Cookie{Name: "session", Ttl: durationpb.New(0), Path: "/"}}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("hash policies (-want +got):\n%s", diff)
	}
	// Policies on a round-robin cluster are emitted too (Envoy ignores them there).
	plain := route(dag.PathPrefix, "/", testCluster("team", "other", 80))
	plain.HashPolicies = []dag.HashPolicy{{Header: "x-user"}}
	if got := translateHost(t, Options{}, plain)[0].GetRoute().GetHashPolicy(); len(got) != 1 {
		t.Errorf("hash policies of a round-robin route = %v, want the one declared", got)
	}
}

func TestRetryOn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		retry *dag.RetryPolicy
		want  *routev3.RetryPolicy
	}{
		{"conditions alone", &dag.RetryPolicy{NumRetries: 2, RetryOn: []string{"5xx", "reset"}},
			&routev3.RetryPolicy{RetryOn: "5xx,reset", NumRetries: wrapperspb.UInt32(2)}},
		{"conditions and status codes", &dag.RetryPolicy{NumRetries: 1, RetryOn: []string{"gateway-error"}, OnStatusCodes: []uint32{409}, PerTryTimeout: time.Second},
			&routev3.RetryPolicy{RetryOn: "gateway-error,retriable-status-codes", NumRetries: wrapperspb.UInt32(1), RetriableStatusCodes: []uint32{409}, PerTryTimeout: durationpb.New(time.Second)}},
		{"retriable-status-codes listed already", &dag.RetryPolicy{NumRetries: 1, RetryOn: []string{"retriable-status-codes", "reset"}, OnStatusCodes: []uint32{503}},
			&routev3.RetryPolicy{RetryOn: "retriable-status-codes,reset", NumRetries: wrapperspb.UInt32(1), RetriableStatusCodes: []uint32{503}}},
		// Without RetryOn, the status-code rule as before (TestRetryPolicyTranslation).
		{"no conditions", &dag.RetryPolicy{NumRetries: 1, OnStatusCodes: []uint32{502, 503, 504}},
			&routev3.RetryPolicy{RetryOn: "gateway-error,retriable-status-codes", NumRetries: wrapperspb.UInt32(1), RetriableStatusCodes: []uint32{502, 503, 504}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := route(dag.PathPrefix, "/", testCluster("team", "web", 80))
			r.Retry = tc.retry
			got := translateHost(t, Options{}, r)[0].GetRoute().GetRetryPolicy()
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("retry policy (-want +got):\n%s", diff)
			}
		})
	}
}

// translateCluster translates a graph whose one route sends to c and returns c's cluster.
func translateCluster(t *testing.T, c *dag.Cluster) *clusterv3.Cluster {
	t.Helper()
	res, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{{Name: "x.example.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", c)}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkMarshal(t, res)
	return res.Clusters[0].(*clusterv3.Cluster)
}

func packed(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestClusterProtocols(t *testing.T) {
	h1 := &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
		ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
	}}
	h2 := &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
		ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
	}}
	options := func(p *httpv3.HttpProtocolOptions) map[string]*anypb.Any {
		return map[string]*anypb.Any{"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": packed(t, p)}
	}
	// Every upstream TLS context carries Contour's default versions, TLS 1.2 to 1.3.
	tlsSocket := func(ctx *tlsv3.UpstreamTlsContext) *corev3.TransportSocket {
		ctx.CommonTlsContext.TlsParams = &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2, TlsMaximumProtocolVersion: tlsv3.TlsParameters_TLSv1_3}
		return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed(t, ctx)}}
	}
	validation := &dag.UpstreamValidation{CAName: "team/ca", CACert: []byte("-----BEGIN CERTIFICATE-----"), SubjectNames: []string{"web.team.svc", "web.example.com"}}
	validationContext := &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("-----BEGIN CERTIFICATE-----")}},
		MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{
			{SanType: tlsv3.SubjectAltNameMatcher_DNS, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "web.team.svc"}}},
			{SanType: tlsv3.SubjectAltNameMatcher_DNS, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "web.example.com"}}},
		},
	}}
	for _, tc := range []struct {
		name       string
		protocol   string
		validation *dag.UpstreamValidation
		idle       *time.Duration
		wantOpts   map[string]*anypb.Any
		wantSocket *corev3.TransportSocket
	}{
		{name: "HTTP/1.1 (default)"},
		{name: "h2c", protocol: "h2c", wantOpts: options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: h2})},
		{name: "h2", protocol: "h2", wantOpts: options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: h2}),
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"h2"}}})},
		{name: "tls", protocol: "tls",
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"http/1.1"}}})},
		{name: "tls verified", protocol: "tls", validation: validation,
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{Sni: "web.team.svc", CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"http/1.1"}, ValidationContextType: validationContext}})},
		{name: "h2 verified", protocol: "h2", validation: validation, wantOpts: options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: h2}),
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{Sni: "web.team.svc", CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"h2"}, ValidationContextType: validationContext}})},
		// A BackendTLSPolicy's hostname is the SNI, its subjectAltNames authenticate.
		{name: "tls verified with its own server name", protocol: "tls", validation: &dag.UpstreamValidation{CAName: validation.CAName, CACert: validation.CACert, SubjectNames: validation.SubjectNames, ServerName: "sni.example.com"},
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{Sni: "sni.example.com", CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"http/1.1"}, ValidationContextType: validationContext}})},
		// A BackendTLSPolicy's URI SANs (SPIFFE IDs) are matched exactly, as written,
		// after its hostnames; any one matching accepts the certificate.
		{name: "tls verified by hostname and URI SANs", protocol: "tls", validation: &dag.UpstreamValidation{CAName: validation.CAName, CACert: validation.CACert,
			SubjectNames: []string{"web.example.com"}, SubjectURIs: []string{"spiffe://Example.com/ns/team/sa/web", "https://id.example.com/web"}, ServerName: "web.example.com"},
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{Sni: "web.example.com", CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"http/1.1"},
				ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: validation.CACert}},
					MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{
						{SanType: tlsv3.SubjectAltNameMatcher_DNS, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "web.example.com"}}},
						{SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "spiffe://Example.com/ns/team/sa/web"}}},
						{SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://id.example.com/web"}}},
					},
				}}}})},
		{name: "h2 verified by a URI SAN alone", protocol: "h2", validation: &dag.UpstreamValidation{CAName: validation.CAName, CACert: validation.CACert,
			SubjectURIs: []string{"spiffe://example.com/grpc"}, ServerName: "grpc.example.com"}, wantOpts: options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: h2}),
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{Sni: "grpc.example.com", CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"h2"},
				ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: validation.CACert}},
					MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{
						{SanType: tlsv3.SubjectAltNameMatcher_URI, Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "spiffe://example.com/grpc"}}},
					},
				}}}})},
		// Validation only applies to TLS protocols.
		{name: "clear text ignores validation", validation: validation},
		{name: "idle timeout alone is HTTP/1.1", idle: dur(90 * time.Second),
			wantOpts: options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: h1, CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(90 * time.Second)}})},
		{name: "tls with idle timeout", protocol: "tls", idle: dur(0),
			wantOpts:   options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: h1, CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: &durationpb.Duration{}}}),
			wantSocket: tlsSocket(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{AlpnProtocols: []string{"http/1.1"}}})},
		{name: "h2c with idle timeout", protocol: "h2c", idle: dur(time.Minute),
			wantOpts: options(&httpv3.HttpProtocolOptions{UpstreamProtocolOptions: h2, CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(time.Minute)}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster("team", "web", 443)
			c.Protocol, c.UpstreamValidation, c.IdleConnectionTimeout = tc.protocol, tc.validation, tc.idle
			got := translateCluster(t, c)
			want := &clusterv3.Cluster{
				Name: "team/web/443", AltStatName: "team_web_443",
				ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
				EdsClusterConfig:              &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: "team/web/443"},
				ConnectTimeout:                durationpb.New(2 * time.Second),
				TypedExtensionProtocolOptions: tc.wantOpts,
				TransportSocket:               tc.wantSocket,
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("cluster (-want +got):\n%s", diff)
			}
		})
	}
}

// A packed message that does not validate is a translation error, as an invalid resource
// is: an SNI longer than 255 bytes is refused inside the UpstreamTlsContext.
func TestInvalidPackedMessageIsAnError(t *testing.T) {
	c := testCluster("team", "web", 443)
	c.Protocol = "tls"
	c.UpstreamValidation = &dag.UpstreamValidation{CACert: []byte("ca"), SubjectNames: []string{strings.Repeat("a", 256)}}
	_, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{{Name: "x.example.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", c)}}}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "UpstreamTlsContext") || !strings.Contains(err.Error(), "Sni") {
		t.Errorf("err = %v, want an invalid UpstreamTlsContext (Sni)", err)
	}
}

func TestOutlierDetection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outlier *dag.OutlierDetection
		want    *clusterv3.OutlierDetection
	}{
		{"none", nil, nil},
		{"all four", &dag.OutlierDetection{Consecutive5xx: 5, Interval: 10 * time.Second, BaseEjectionTime: 30 * time.Second, MaxEjectionPercent: 50},
			&clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(5), Interval: durationpb.New(10 * time.Second), BaseEjectionTime: durationpb.New(30 * time.Second), MaxEjectionPercent: wrapperspb.UInt32(50), EnforcingSuccessRate: wrapperspb.UInt32(0), AlwaysEjectOneHost: wrapperspb.Bool(true)}},
		// Envoy refuses 0s durations and more than 100%.
		{"zero durations left to Envoy, percentage capped", &dag.OutlierDetection{Consecutive5xx: 3, MaxEjectionPercent: 250},
			&clusterv3.OutlierDetection{Consecutive_5Xx: wrapperspb.UInt32(3), MaxEjectionPercent: wrapperspb.UInt32(100), EnforcingSuccessRate: wrapperspb.UInt32(0), AlwaysEjectOneHost: wrapperspb.Bool(true)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testCluster("team", "web", 80)
			c.Outlier = tc.outlier
			if diff := cmp.Diff(tc.want, translateCluster(t, c).OutlierDetection, protocmp.Transform()); diff != "" {
				t.Errorf("outlier detection (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHealthCheckShapes(t *testing.T) {
	base := func() *corev3.HealthCheck {
		return &corev3.HealthCheck{
			Timeout:            durationpb.New(2 * time.Second),
			Interval:           durationpb.New(5 * time.Second),
			NoTrafficInterval:  durationpb.New(5 * time.Second),
			UnhealthyThreshold: wrapperspb.UInt32(3),
			HealthyThreshold:   wrapperspb.UInt32(2),
		}
	}
	tcp := base()
	tcp.HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}
	expected := base()
	expected.HealthChecker = &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
		Path: "/ready", Host: "web.example.com",
		ExpectedStatuses: []*typev3.Int64Range{{Start: 200, End: 300}, {Start: 503, End: 504}},
		// Unchanged: expected statuses are looked up first, so they succeed even inside
		// these ranges, and every other answer keeps seed 003's meaning.
		RetriableStatuses: []*typev3.Int64Range{{Start: 100, End: 503}, {Start: 504, End: 600}},
	}}
	for _, tc := range []struct {
		name string
		hc   dag.HealthCheck
		want *corev3.HealthCheck
	}{
		{"tcp", dag.HealthCheck{TCP: true, Path: "/unused", Host: "unused"}, tcp},
		{"expected statuses", dag.HealthCheck{Path: "/ready", Host: "web.example.com", ExpectedStatuses: []dag.StatusRange{{Start: 200, End: 300}, {Start: 503, End: 504}}}, expected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := tc.hc
			hc.Interval, hc.Timeout, hc.UnhealthyThreshold, hc.HealthyThreshold = 5*time.Second, 2*time.Second, 3, 2
			c := testCluster("team", "web", 80)
			c.HealthCheck = &hc
			if diff := cmp.Diff([]*corev3.HealthCheck{tc.want}, translateCluster(t, c).HealthChecks, protocmp.Transform()); diff != "" {
				t.Errorf("health checks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTCPProxyAndPassthroughHosts(t *testing.T) {
	web, db, dbCanary, dark, vault := testCluster("team", "web", 80), testCluster("team", "db", 5432), testCluster("team", "db-canary", 5432), testCluster("team", "dark", 5432), testCluster("team", "vault", 8200)
	secret := &dag.Secret{Name: "team/cert", Cert: []byte("c"), Key: []byte("k")}
	tcpSecret := &dag.Secret{Name: "team/db-cert", Cert: []byte("c"), Key: []byte("k")}
	g := &dag.Graph{HTTPS: []*dag.SecureVirtualHost{
		{VirtualHost: dag.VirtualHost{Name: "www.example.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}, Secret: secret, MaxTLSVersion: "1.2"},
		{VirtualHost: dag.VirtualHost{Name: "db.example.com"}, Secret: tcpSecret, MinTLSVersion: "1.3", TCPProxy: &dag.TCPProxy{Source: httpProxySource, Clusters: []*dag.WeightedCluster{
			{Cluster: db, Weight: 80}, {Cluster: dbCanary, Weight: 20}, {Cluster: dark, Weight: 0},
		}}},
		{VirtualHost: dag.VirtualHost{Name: "vault.example.com"}, Passthrough: true, TCPProxy: &dag.TCPProxy{Source: httpProxySource, Clusters: []*dag.WeightedCluster{{Cluster: vault, Weight: 1}}}},
		{VirtualHost: dag.VirtualHost{Name: "*.tcp.example.com"}, Passthrough: true, TCPProxy: &dag.TCPProxy{Clusters: []*dag.WeightedCluster{{Cluster: vault, Weight: 0}, {Cluster: db, Weight: 0}}}},
	}}
	res, err := Translate(g, Options{HTTPSAddress: "127.0.0.1:8443"})
	if err != nil {
		t.Fatal(err)
	}
	checkMarshal(t, res)
	downstream := func(secret string, min, max tlsv3.TlsParameters_TlsProtocol, alpn []string) *corev3.TransportSocket {
		return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed(t, &tlsv3.DownstreamTlsContext{
			CommonTlsContext: &tlsv3.CommonTlsContext{
				TlsParams:                      &tlsv3.TlsParameters{TlsMinimumProtocolVersion: min, TlsMaximumProtocolVersion: max},
				TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: secret, SdsConfig: adsSource()}},
				AlpnProtocols:                  alpn,
			},
		})}}
	}
	// Every TCP proxy writes an access log line per connection, as the HCM does per request.
	tcpFilter := func(tp *tcpproxyv3.TcpProxy) []*listenerv3.Filter {
		tp.AccessLog = []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.stdout",
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: packed(t, &streamv3.StdoutAccessLog{})}}}
		return []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: packed(t, tp)}}}
	}
	want := &listenerv3.Listener{
		Name:    ListenerHTTPS,
		Address: address(hostPort{host: "127.0.0.1", port: 8443}),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       "envoy.filters.listener.tls_inspector",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: packed(t, &tlsinspectorv3.TlsInspector{})},
		}},
		FilterChains: []*listenerv3.FilterChain{
			{
				Name:             "www.example.com",
				FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"www.example.com"}},
				TransportSocket:  downstream("team/cert", tlsv3.TlsParameters_TLSv1_2, tlsv3.TlsParameters_TLSv1_2, []string{"h2", "http/1.1"}),
				Filters:          []*listenerv3.Filter{httpConnectionManager(ListenerHTTPS, RouteHTTPS("www.example.com"), nil, Options{}.withDefaults())},
			},
			{
				// TLS terminated, then a TCP stream: no ALPN offered; a weight-0 cluster is left out.
				Name:             "db.example.com",
				FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"db.example.com"}},
				TransportSocket:  downstream("team/db-cert", tlsv3.TlsParameters_TLSv1_3, tlsv3.TlsParameters_TLSv1_3, nil),
				Filters: tcpFilter(&tcpproxyv3.TcpProxy{StatPrefix: "tcp_db_example_com", ClusterSpecifier: &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{
					Clusters: []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "team/db/5432", Weight: 80}, {Name: "team/db-canary/5432", Weight: 20}},
				}}}),
			},
			{
				// Passthrough: no transport socket.
				Name:             "vault.example.com",
				FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"vault.example.com"}},
				Filters:          tcpFilter(&tcpproxyv3.TcpProxy{StatPrefix: "tcp_vault_example_com", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "team/vault/8200"}}),
			},
			{
				// Every weight 0: an even split (TCP weights must be at least 1).
				Name:             "*.tcp.example.com",
				FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"*.tcp.example.com"}},
				Filters: tcpFilter(&tcpproxyv3.TcpProxy{StatPrefix: "tcp_wildcard_tcp_example_com", ClusterSpecifier: &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{
					Clusters: []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "team/vault/8200", Weight: 1}, {Name: "team/db/5432", Weight: 1}},
				}}}),
			},
		},
	}
	if len(res.Listeners) != 2 {
		t.Fatalf("got %d listeners, want 2", len(res.Listeners))
	}
	if diff := cmp.Diff(want, res.Listeners[1], protocmp.Transform()); diff != "" {
		t.Errorf("HTTPS listener (-want +got):\n%s", diff)
	}
	// Route configurations only for the HTTP host; secrets only for the terminated ones.
	var routeConfigs, secrets, clusters, assignments []string
	for _, r := range res.Routes {
		routeConfigs = append(routeConfigs, r.(*routev3.RouteConfiguration).Name)
	}
	for _, s := range res.Secrets {
		secrets = append(secrets, s.(*tlsv3.Secret).Name)
	}
	for _, c := range res.Clusters {
		clusters = append(clusters, c.(*clusterv3.Cluster).Name)
	}
	for _, e := range res.Endpoints {
		assignments = append(assignments, resourceName(e))
	}
	if diff := cmp.Diff([]string{"ingress_http", "https/www.example.com"}, routeConfigs); diff != "" {
		t.Errorf("route configurations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"team/cert", "team/db-cert"}, secrets); diff != "" {
		t.Errorf("secrets (-want +got):\n%s", diff)
	}
	wantClusters := []string{"team/web/80", "team/db/5432", "team/db-canary/5432", "team/dark/5432", "team/vault/8200"}
	if diff := cmp.Diff(wantClusters, clusters); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantClusters, assignments); diff != "" {
		t.Errorf("EDS assignments (-want +got):\n%s", diff)
	}
}

// A host with no certificate that is not a passthrough cannot be served: it gets no
// filter chain, no route configuration and no secret, and nothing dereferences the nil
// Secret. A TCP proxy with no cluster gets no chain either.
func TestSecureHostsThatCannotBeServedAreLeftOut(t *testing.T) {
	g := &dag.Graph{HTTPS: []*dag.SecureVirtualHost{
		{VirtualHost: dag.VirtualHost{Name: "nocert.example.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", testCluster("team", "web", 80))}}},
		{VirtualHost: dag.VirtualHost{Name: "tcp-nocert.example.com"}, TCPProxy: &dag.TCPProxy{Clusters: []*dag.WeightedCluster{{Cluster: testCluster("team", "db", 5432), Weight: 1}}}},
		{VirtualHost: dag.VirtualHost{Name: "empty.example.com"}, Secret: &dag.Secret{Name: "team/cert"}, TCPProxy: &dag.TCPProxy{}},
		{VirtualHost: dag.VirtualHost{Name: "empty-passthrough.example.com"}, Passthrough: true, TCPProxy: &dag.TCPProxy{}},
	}}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Listeners[1].(*listenerv3.Listener).FilterChains); n != 0 {
		t.Errorf("got %d filter chains, want none", n)
	}
	if len(res.Routes) != 1 || len(res.Secrets) != 0 {
		t.Errorf("got %d route configurations and %d secrets, want only ingress_http", len(res.Routes), len(res.Secrets))
	}
}

// Every HTTPProxy shape in one graph, plain and secure: it translates (so every resource
// and every packed config validates) and marshals.
func TestEveryHTTPProxyShapeTranslates(t *testing.T) {
	h2 := testCluster("team", "grpc", 443)
	h2.Name += "/h2"
	h2.Protocol = "h2"
	h2.UpstreamValidation = &dag.UpstreamValidation{CAName: "team/ca", CACert: []byte("ca"), SubjectNames: []string{"grpc.team"}}
	h2.Outlier = &dag.OutlierDetection{Consecutive5xx: 5, Interval: time.Second, BaseEjectionTime: time.Second, MaxEjectionPercent: 10}
	h2.HealthCheck = &dag.HealthCheck{TCP: true, Interval: time.Second, Timeout: time.Second, UnhealthyThreshold: 1, HealthyThreshold: 1}
	ring := testCluster("team", "web", 80)
	ring.Name += "/ring"
	ring.LoadBalancer = dag.LBRingHash
	ring.IdleConnectionTimeout = dur(time.Minute)
	ring.HealthCheck = &dag.HealthCheck{Path: "/hz", Host: "web", Interval: time.Second, Timeout: time.Second, UnhealthyThreshold: 1, HealthyThreshold: 1, ExpectedStatuses: []dag.StatusRange{{Start: 200, End: 400}}}
	routes := []*dag.Route{
		{Path: dag.PathMatch{Kind: dag.PathRegex, Value: "/api/v[0-9]+"}, Source: httpProxySource,
			Headers:         []dag.HeaderMatch{{Name: "x-a", Kind: dag.MatchRegex, Value: "a+", IgnoreCase: true, Invert: true}},
			Query:           []dag.QueryMatch{{Name: "q", Kind: dag.MatchContains, Value: "x", IgnoreCase: true}},
			RequestHeaders:  &dag.HeadersPolicy{Set: []dag.HeaderValue{{Name: "X-A", Value: "1"}, {Name: "Host", Value: "h"}}, Remove: []string{"X-B"}},
			ResponseHeaders: &dag.HeadersPolicy{Set: []dag.HeaderValue{{Name: "X-C", Value: "2"}}},
			Websocket:       true,
			HashPolicies:    []dag.HashPolicy{{Cookie: "c", CookieTTL: time.Minute, CookiePath: "/"}, {SourceIP: true, Terminal: true}},
			Retry:           &dag.RetryPolicy{NumRetries: 2, RetryOn: []string{"5xx"}, OnStatusCodes: []uint32{409}},
			Clusters: []*dag.WeightedCluster{
				{Cluster: h2, Weight: 1, RequestHeaders: &dag.HeadersPolicy{Set: []dag.HeaderValue{{Name: "Host", Value: "grpc"}}}},
				{Cluster: ring, Weight: 3, ResponseHeaders: &dag.HeadersPolicy{Remove: []string{"X-D"}}},
			}},
		{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/old"}, Source: httpProxySource, Redirect: &dag.Redirect{Scheme: "https", Hostname: "new", Port: 443, Prefix: "/new", StatusCode: 302}},
		{Path: dag.PathMatch{Kind: dag.PathExact, Value: "/health"}, Source: httpProxySource, DirectStatus: 200, DirectBody: "ok"},
	}
	vh := dag.VirtualHost{Name: "app.example.com", Routes: routes}
	g := &dag.Graph{
		HTTP: []*dag.VirtualHost{&vh},
		HTTPS: []*dag.SecureVirtualHost{
			{VirtualHost: vh, Secret: &dag.Secret{Name: "team/cert", Cert: []byte("c"), Key: []byte("k")}, MinTLSVersion: "1.2", MaxTLSVersion: "1.2"},
			{VirtualHost: dag.VirtualHost{Name: "tls.example.com"}, Passthrough: true, TCPProxy: &dag.TCPProxy{Clusters: []*dag.WeightedCluster{{Cluster: h2, Weight: 1}}}},
		},
	}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkMarshal(t, res)
	if len(res.Clusters) != 2 || len(res.Secrets) != 1 || len(res.Routes) != 2 {
		t.Errorf("got %d clusters, %d secrets, %d route configurations; want 2, 1, 2", len(res.Clusters), len(res.Secrets), len(res.Routes))
	}
}

func resourceName(r types.Resource) string {
	type named interface{ GetClusterName() string }
	return r.(named).GetClusterName()
}
