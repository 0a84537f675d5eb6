package translate

import (
	"net/netip"
	"slices"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

func unpack[M proto.Message](t *testing.T, a *anypb.Any, m M) M {
	t.Helper()
	if a == nil {
		t.Fatalf("no %T", m)
	}
	if err := a.UnmarshalTo(m); err != nil {
		t.Fatal(err)
	}
	return m
}

// A host's IP rules and CORS policy go in its typed_per_filter_config, a route's
// own in the route's; every connection manager has both filters before the
// router, and trusts the hops it is told to.
func TestIPFilterAndCORSTranslation(t *testing.T) {
	web := testCluster("default", "web", 80)
	admin := route(dag.PathPrefix, "/admin", web)
	admin.IPFilter = &dag.IPFilter{Rules: []dag.IPRule{{Remote: true, Prefix: netip.MustParsePrefix("192.168.0.0/16")}}}
	admin.CORS = &dag.CORSPolicy{AllowOrigins: []dag.CORSOrigin{{Any: true}}, AllowMethods: []string{"*"}, AnswerRefusedPreflights: true}
	vh := &dag.VirtualHost{
		Name:   "ip.example.com",
		Routes: []*dag.Route{admin, route(dag.PathPrefix, "/", web)},
		IPFilter: &dag.IPFilter{Allow: true, Rules: []dag.IPRule{
			{Prefix: netip.MustParsePrefix("10.0.0.0/8")},
			{Remote: true, Prefix: netip.MustParsePrefix("2001:db8::7/128")},
		}},
		CORS: &dag.CORSPolicy{
			AllowOrigins:  []dag.CORSOrigin{{Exact: "https://app.example.com"}, {Regex: `https://.*\.example\.org`}},
			AllowMethods:  []string{"GET", "POST"},
			AllowHeaders:  []string{"authorization", "x-a"},
			ExposeHeaders: []string{"x-total"}, AllowCredentials: true, AllowPrivateNetwork: true, MaxAge: "600",
		},
	}
	res, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{vh}}, Options{NumTrustedHops: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range append(append(res.Listeners, res.Routes...), res.Clusters...) {
		if err := r.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
			t.Errorf("%T: %v", r, err)
		}
	}
	rc := res.Routes[0].(*routev3.RouteConfiguration)
	gotVH := rc.VirtualHosts[0]

	cidr := func(p string, n uint32) *corev3.CidrRange {
		return &corev3.CidrRange{AddressPrefix: p, PrefixLen: wrapperspb.UInt32(n)}
	}
	ipRules := func(action rbacconfigv3.RBAC_Action, ids ...*rbacconfigv3.Principal) *rbacv3.RBACPerRoute {
		return &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{Action: action, Policies: map[string]*rbacconfigv3.Policy{"ip-rules": {
			Permissions: []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_Any{Any: true}}},
			Principals:  []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_OrIds{OrIds: &rbacconfigv3.Principal_Set{Ids: ids}}}},
		}}}}}
	}
	wantHostRBAC := ipRules(rbacconfigv3.RBAC_ALLOW,
		&rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_DirectRemoteIp{DirectRemoteIp: cidr("10.0.0.0", 8)}},
		&rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_RemoteIp{RemoteIp: cidr("2001:db8::7", 128)}})
	if diff := cmp.Diff(wantHostRBAC, unpack(t, gotVH.TypedPerFilterConfig[rbacFilterName], &rbacv3.RBACPerRoute{}), protocmp.Transform()); diff != "" {
		t.Errorf("host RBAC (-want +got):\n%s", diff)
	}
	wantHostCORS := &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{
			{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://app.example.com"}},
			{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `https://.*\.example\.org`}}},
		},
		AllowMethods: "GET,POST", AllowHeaders: "authorization,x-a", ExposeHeaders: "x-total", MaxAge: "600",
		AllowCredentials: wrapperspb.Bool(true), AllowPrivateNetworkAccess: wrapperspb.Bool(true),
	}
	if diff := cmp.Diff(wantHostCORS, unpack(t, gotVH.TypedPerFilterConfig[corsFilterName], &corsv3.CorsPolicy{}), protocmp.Transform()); diff != "" {
		t.Errorf("host CORS (-want +got):\n%s", diff)
	}

	adminRoute, rootRoute := gotVH.Routes[0], gotVH.Routes[1]
	wantRouteRBAC := ipRules(rbacconfigv3.RBAC_DENY,
		&rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_RemoteIp{RemoteIp: cidr("192.168.0.0", 16)}})
	if diff := cmp.Diff(wantRouteRBAC, unpack(t, adminRoute.TypedPerFilterConfig[rbacFilterName], &rbacv3.RBACPerRoute{}), protocmp.Transform()); diff != "" {
		t.Errorf("route RBAC (-want +got):\n%s", diff)
	}
	wantRouteCORS := &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "*"}}},
		AllowMethods:           "*", ForwardNotMatchingPreflights: wrapperspb.Bool(false),
	}
	if diff := cmp.Diff(wantRouteCORS, unpack(t, adminRoute.TypedPerFilterConfig[corsFilterName], &corsv3.CorsPolicy{}), protocmp.Transform()); diff != "" {
		t.Errorf("route CORS (-want +got):\n%s", diff)
	}
	if rootRoute.TypedPerFilterConfig != nil {
		t.Errorf("a route without policies of its own has typed_per_filter_config %v", rootRoute.TypedPerFilterConfig)
	}

	l := res.Listeners[0].(*listenerv3.Listener)
	hcm := unpack(t, l.FilterChains[0].Filters[0].GetTypedConfig(), &hcmv3.HttpConnectionManager{})
	var names []string
	for _, f := range hcm.HttpFilters {
		names = append(names, f.Name)
	}
	// CORS before the IP rules (a preflight is answered before anyone is refused), the
	// router last; the other filters of httpFilters may come between.
	if c, r := slices.Index(names, corsFilterName), slices.Index(names, rbacFilterName); c < 0 || r < c || names[len(names)-1] != "envoy.filters.http.router" {
		t.Errorf("http_filters = %v, want cors before rbac, the router last", names)
	}
	if hcm.XffNumTrustedHops != 2 || !hcm.GetUseRemoteAddress().GetValue() {
		t.Errorf("xff_num_trusted_hops %d, use_remote_address %v; want 2, true", hcm.XffNumTrustedHops, hcm.GetUseRemoteAddress().GetValue())
	}
}
