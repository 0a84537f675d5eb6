package translate

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// The route features Gateway API's HTTPRoute needs, as the graph carries them, in
// Envoy's exact shapes. translateHost validates every resource (ValidateAll).

func regexRewriteOf(pattern, substitution string) *matcherv3.RegexMatchAndSubstitute {
	return &matcherv3.RegexMatchAndSubstitute{Pattern: &matcherv3.RegexMatcher{Regex: pattern}, Substitution: substitution}
}

func TestRedirectStatusCodes(t *testing.T) {
	for status, want := range map[uint32]routev3.RedirectAction_RedirectResponseCode{
		0:   routev3.RedirectAction_MOVED_PERMANENTLY,
		301: routev3.RedirectAction_MOVED_PERMANENTLY,
		302: routev3.RedirectAction_FOUND,
		303: routev3.RedirectAction_SEE_OTHER,
		307: routev3.RedirectAction_TEMPORARY_REDIRECT,
		308: routev3.RedirectAction_PERMANENT_REDIRECT,
	} {
		got := translateHost(t, Options{}, &dag.Route{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}, Redirect: &dag.Redirect{StatusCode: status}})
		if code := got[0].GetRedirect().GetResponseCode(); code != want {
			t.Errorf("StatusCode %d: response_code %v, want %v", status, code, want)
		}
	}
}

// TestRedirectPorts: a port that is the default of the redirect's scheme is left out, so
// that the Location names none (the request's Host has lost its port before routing).
func TestRedirectPorts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		redirect dag.Redirect
		want     *routev3.RedirectAction
	}{
		{"https and 443", dag.Redirect{Scheme: "https", Hostname: "example.org", Port: 443}, &routev3.RedirectAction{
			SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}, HostRedirect: "example.org"}},
		{"https and 8443", dag.Redirect{Scheme: "https", Port: 8443}, &routev3.RedirectAction{
			SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}, PortRedirect: 8443}},
		{"http and 80", dag.Redirect{Scheme: "http", Port: 80}, &routev3.RedirectAction{
			SchemeRewriteSpecifier: &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "http"}}},
		{"http and 443", dag.Redirect{Scheme: "http", Port: 443}, &routev3.RedirectAction{
			SchemeRewriteSpecifier: &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "http"}, PortRedirect: 443}},
		// Without a scheme the translator cannot know which port is the default one.
		{"80 without a scheme", dag.Redirect{Hostname: "example.org", Port: 80}, &routev3.RedirectAction{
			HostRedirect: "example.org", PortRedirect: 80}},
		{"https without a port", dag.Redirect{Scheme: "https"}, &routev3.RedirectAction{
			SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rd := tc.redirect
			rd.StatusCode = 302
			tc.want.ResponseCode = routev3.RedirectAction_FOUND
			got := translateHost(t, Options{}, &dag.Route{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}, Redirect: &rd})
			if diff := cmp.Diff(tc.want, got[0].GetRedirect(), protocmp.Transform()); diff != "" {
				t.Errorf("redirect (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPathRewrites: ReplaceFullPath is a regex_rewrite of the whole path; a prefix
// rewrite is Envoy's prefix_rewrite where that replaces whole path elements, a
// regex_rewrite where it would double or lose a slash. Redirects alike.
func TestPathRewrites(t *testing.T) {
	web := testCluster("team", "web", 80)
	for _, tc := range []struct {
		name       string
		path       dag.PathMatch
		prefix     string
		full       string
		wantPrefix string
		wantRegex  *matcherv3.RegexMatchAndSubstitute
		wantPath   string // of a redirect
	}{
		{name: "full path", path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/full"}, full: "/one",
			wantRegex: regexRewriteOf("^/.*$", "/one"), wantPath: "/one"},
		{name: "full path with a backslash", path: dag.PathMatch{Kind: dag.PathExact, Value: "/x"}, full: `/a\1`,
			wantRegex: regexRewriteOf("^/.*$", `/a\\1`), wantPath: `/a\1`},
		{name: "prefix to prefix", path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/foo"}, prefix: "/xyz", wantPrefix: "/xyz"},
		{name: "prefix to prefix/", path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/foo"}, prefix: "/xyz/",
			wantRegex: regexRewriteOf(`^/foo/?`, "/xyz/")},
		{name: "prefix to /", path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/strip.me"}, prefix: "/",
			wantRegex: regexRewriteOf(`^/strip\.me/?`, "/")},
		{name: "/ to prefix", path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}, prefix: "/xyz", wantPrefix: "/xyz/"},
		{name: "/ to prefix/", path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/"}, prefix: "/xyz/", wantPrefix: "/xyz/"},
		{name: "string prefixes replace characters", path: dag.PathMatch{Kind: dag.PathStringPrefix, Value: "/foo"}, prefix: "/", wantPrefix: "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &dag.Route{Path: tc.path, Clusters: []*dag.WeightedCluster{{Cluster: web, Weight: 1}}, PrefixRewrite: tc.prefix, PathRewrite: tc.full}
			ra := translateHost(t, Options{}, r)[0].GetRoute()
			if ra.GetPrefixRewrite() != tc.wantPrefix {
				t.Errorf("prefix_rewrite %q, want %q", ra.GetPrefixRewrite(), tc.wantPrefix)
			}
			if diff := cmp.Diff(tc.wantRegex, ra.GetRegexRewrite(), protocmp.Transform()); diff != "" {
				t.Errorf("regex_rewrite (-want +got):\n%s", diff)
			}

			rd := &dag.Redirect{Prefix: tc.prefix, Path: tc.full, StatusCode: 302}
			got := translateHost(t, Options{}, &dag.Route{Path: tc.path, Redirect: rd})[0].GetRedirect()
			want := &routev3.RedirectAction{ResponseCode: routev3.RedirectAction_FOUND}
			switch {
			case tc.full != "":
				want.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: tc.wantPath}
			case tc.wantRegex != nil:
				want.PathRewriteSpecifier = &routev3.RedirectAction_RegexRewrite{RegexRewrite: tc.wantRegex}
			default:
				want.PathRewriteSpecifier = &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: tc.wantPrefix}
			}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("redirect (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHeadersPolicyAdd: Add appends (APPEND_IF_EXISTS_OR_ADD) beside Set and Remove, on
// routes and on weighted clusters, in both directions. A cluster whose only change is an
// addition still gets its own weighted cluster entry.
func TestHeadersPolicyAdd(t *testing.T) {
	web := testCluster("team", "web", 80)
	add := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD}
	}
	set := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
	}
	r := &dag.Route{
		Path: dag.PathMatch{Kind: dag.PathPrefix, Value: "/"},
		Clusters: []*dag.WeightedCluster{{Cluster: web, Weight: 1,
			RequestHeaders:  &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Backend", Value: "web"}}},
			ResponseHeaders: &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Served-By", Value: "web"}}},
		}},
		RequestHeaders: &dag.HeadersPolicy{
			Set:    []dag.HeaderValue{{Name: "X-Header-Set", Value: "set-overwrites-values"}},
			Add:    []dag.HeaderValue{{Name: "X-Header-Add", Value: "add-appends-values"}, {Name: "Host", Value: "ignored"}, {Name: ":path", Value: "/ignored"}},
			Remove: []string{"X-Header-Remove"},
		},
		ResponseHeaders: &dag.HeadersPolicy{Add: []dag.HeaderValue{{Name: "X-Header-Add", Value: "resp"}}},
	}
	got := translateHost(t, Options{}, r)[0]
	want := &routev3.Route{
		Name:                   "prefix:/",
		Match:                  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		RequestHeadersToAdd:    []*corev3.HeaderValueOption{set("X-Header-Set", "set-overwrites-values"), add("X-Header-Add", "add-appends-values")},
		RequestHeadersToRemove: []string{"X-Header-Remove"},
		ResponseHeadersToAdd:   []*corev3.HeaderValueOption{add("X-Header-Add", "resp")},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
			Clusters: []*routev3.WeightedCluster_ClusterWeight{{
				Name: "team/web/80", Weight: wrapperspb.UInt32(1),
				RequestHeadersToAdd:  []*corev3.HeaderValueOption{add("X-Backend", "web")},
				ResponseHeadersToAdd: []*corev3.HeaderValueOption{add("X-Served-By", "web")},
			}},
		}}}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("route (-want +got):\n%s", diff)
	}
}

// TestMethodMatch: a method condition is a ":method" header matcher, which Envoy accepts
// on a route (and the route name tells the methods apart).
func TestMethodMatch(t *testing.T) {
	web := testCluster("team", "web", 80)
	get := route(dag.PathPrefix, "/", web)
	get.Headers = []dag.HeaderMatch{{Name: ":method", Kind: dag.MatchExact, Value: "GET"}}
	post := route(dag.PathPrefix, "/", web)
	post.Headers = []dag.HeaderMatch{{Name: ":method", Kind: dag.MatchExact, Value: "POST"}}
	got := translateHost(t, Options{}, get, post)
	want := []*routev3.HeaderMatcher{{Name: ":method", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
		StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "GET"}}}}}
	if diff := cmp.Diff(want, got[0].GetMatch().GetHeaders(), protocmp.Transform()); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if got[0].GetName() == got[1].GetName() {
		t.Errorf("routes of two methods share the name %q", got[0].GetName())
	}
}

// TestGatewayTimeoutsAndRetries: timeouts.request is the route timeout (retries
// included), timeouts.backendRequest the per-try timeout, with or without retries;
// the retry backoff is retry_back_off's base interval.
func TestGatewayTimeoutsAndRetries(t *testing.T) {
	web := testCluster("team", "web", 80)
	r := route(dag.PathPrefix, "/", web)
	r.Timeouts = &dag.TimeoutPolicy{Request: dur(500 * time.Millisecond)}
	r.Retry = &dag.RetryPolicy{NumRetries: 3, OnStatusCodes: []uint32{500}, PerTryTimeout: 250 * time.Millisecond,
		RetryOn: []string{"connect-failure", "refused-stream"}, Backoff: 100 * time.Millisecond}
	perTryOnly := route(dag.PathPrefix, "/backend", web)
	perTryOnly.Retry = &dag.RetryPolicy{PerTryTimeout: time.Second}
	got := translateHost(t, Options{}, perTryOnly, r)
	wantRetry := &routev3.RetryPolicy{
		RetryOn:              "connect-failure,refused-stream,retriable-status-codes",
		NumRetries:           wrapperspb.UInt32(3),
		RetriableStatusCodes: []uint32{500},
		PerTryTimeout:        durationpb.New(250 * time.Millisecond),
		RetryBackOff:         &routev3.RetryPolicy_RetryBackOff{BaseInterval: durationpb.New(100 * time.Millisecond)},
	}
	if diff := cmp.Diff(wantRetry, got[1].GetRoute().GetRetryPolicy(), protocmp.Transform()); diff != "" {
		t.Errorf("retry policy (-want +got):\n%s", diff)
	}
	if d := got[1].GetRoute().GetTimeout().AsDuration(); d != 500*time.Millisecond {
		t.Errorf("route timeout %v, want 500ms", d)
	}
	wantPerTry := &routev3.RetryPolicy{RetryOn: "retriable-status-codes", NumRetries: wrapperspb.UInt32(0), PerTryTimeout: durationpb.New(time.Second)}
	if diff := cmp.Diff(wantPerTry, got[0].GetRoute().GetRetryPolicy(), protocmp.Transform()); diff != "" {
		t.Errorf("a per-try timeout without retries (-want +got):\n%s", diff)
	}
}

// TestLongPrefixRewriteTwin: a prefix whose expression would be over Envoy's program size
// limit (which would refuse the whole route configuration) keeps prefix_rewrite, and a
// twin route on the prefix with its "/" goes first, with the same conditions and action.
func TestLongPrefixRewriteTwin(t *testing.T) {
	long := "/" + strings.Repeat("a", 120)
	web := testCluster("team", "web", 80)
	r := &dag.Route{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: long}, Clusters: []*dag.WeightedCluster{{Cluster: web, Weight: 1}},
		PrefixRewrite: "/", Headers: []dag.HeaderMatch{{Name: "x-a", Kind: dag.MatchExact, Value: "1"}},
		Source: dag.ObjectRef{Kind: "HTTPRoute", Namespace: "team", Name: "r"}}
	rd := &dag.Route{Path: dag.PathMatch{Kind: dag.PathPrefix, Value: long + "/b"}, Redirect: &dag.Redirect{Prefix: "/new/", StatusCode: 302}}
	got := translateHost(t, Options{}, rd, r)
	if len(got) != 4 {
		t.Fatalf("%d routes, want 4 (each with its twin first)", len(got))
	}
	wantMatch := func(prefix string) *routev3.RouteMatch {
		return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: prefix}}
	}
	if diff := cmp.Diff(wantMatch(long+"/b/"), got[0].GetMatch(), protocmp.Transform()); diff != "" {
		t.Errorf("redirect twin match (-want +got):\n%s", diff)
	}
	if p := got[0].GetRedirect().GetPrefixRewrite(); p != "/new/" || got[1].GetRedirect().GetPrefixRewrite() != "/new/" {
		t.Errorf("redirect prefix_rewrite %q and %q, want /new/ on both", p, got[1].GetRedirect().GetPrefixRewrite())
	}
	twin, orig := got[2], got[3]
	want := wantMatch(long + "/")
	want.Headers = orig.GetMatch().GetHeaders()
	if diff := cmp.Diff(want, twin.GetMatch(), protocmp.Transform()); diff != "" {
		t.Errorf("twin match (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orig.GetRoute(), twin.GetRoute(), protocmp.Transform()); diff != "" {
		t.Errorf("twin action differs from its route's (-route +twin):\n%s", diff)
	}
	if orig.GetRoute().GetPrefixRewrite() != "/" || orig.GetRoute().GetRegexRewrite() != nil {
		t.Errorf("route rewrite: prefix %q regex %v, want prefix_rewrite /", orig.GetRoute().GetPrefixRewrite(), orig.GetRoute().GetRegexRewrite())
	}
	if twin.GetName() == orig.GetName() || !strings.HasPrefix(twin.GetName(), "httproute/team/r:prefix:"+long+"/?h=") {
		t.Errorf("twin name %q (route %q), want its own, on the prefix with its /", twin.GetName(), orig.GetName())
	}
}
