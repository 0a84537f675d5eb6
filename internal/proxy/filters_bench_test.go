package proxy

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	grpcwebv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkProxyRequestIPAndCORS is BenchmarkProxyRequest (a request with an
// Origin header) through the connection managers Portico's translator emits
// (the gRPC-Web, CORS and RBAC filters before the router) against the same
// route without them: "none" has only the router; "idle" has the filters but
// no policy on the route, and the request is not gRPC-Web: the chain skips it; "rbac" allows the client's
// block, "cors" allows its origin, "rbac+cors" both.
func BenchmarkProxyRequestIPAndCORS(b *testing.B) {
	rbacPolicy := func(b *testing.B) *anypb.Any {
		return mustAny(b, &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{Action: rbacconfigv3.RBAC_ALLOW, Policies: map[string]*rbacconfigv3.Policy{"ip-rules": {
			Permissions: []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_Any{Any: true}}},
			Principals: []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_OrIds{OrIds: &rbacconfigv3.Principal_Set{Ids: []*rbacconfigv3.Principal{
				{Identifier: &rbacconfigv3.Principal_DirectRemoteIp{DirectRemoteIp: &corev3.CidrRange{AddressPrefix: "10.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}},
				{Identifier: &rbacconfigv3.Principal_DirectRemoteIp{DirectRemoteIp: &corev3.CidrRange{AddressPrefix: "127.0.0.0", PrefixLen: wrapperspb.UInt32(8)}}},
			}}}}},
		}}}}})
	}
	corsPolicy := func(b *testing.B) *anypb.Any {
		return mustAny(b, &corsv3.CorsPolicy{
			AllowOriginStringMatch: []*matcherv3.StringMatcher{
				{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "https://other.example.com"}},
				{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: `https://.*\.example\.com`}}},
			},
			AllowMethods: "GET,POST", ExposeHeaders: "x-total", AllowCredentials: wrapperspb.Bool(true),
		})
	}
	for _, tc := range []struct {
		name     string
		filters  bool
		policies func(b *testing.B) map[string]*anypb.Any
	}{
		{name: "none"},
		{name: "idle", filters: true},
		{name: "rbac", filters: true, policies: func(b *testing.B) map[string]*anypb.Any {
			return map[string]*anypb.Any{"envoy.filters.http.rbac": rbacPolicy(b)}
		}},
		{name: "cors", filters: true, policies: func(b *testing.B) map[string]*anypb.Any {
			return map[string]*anypb.Any{"envoy.filters.http.cors": corsPolicy(b)}
		}},
		{name: "rbac+cors", filters: true, policies: func(b *testing.B) map[string]*anypb.Any {
			return map[string]*anypb.Any{"envoy.filters.http.rbac": rbacPolicy(b), "envoy.filters.http.cors": corsPolicy(b)}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l := httpListener(b)
			if tc.filters {
				l = modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
					h.HttpFilters = []*hcmv3.HttpFilter{
						{Name: "envoy.filters.http.grpc_web", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, &grpcwebv3.GrpcWeb{})}},
						{Name: "envoy.filters.http.cors", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, &corsv3.Cors{})}},
						{Name: "envoy.filters.http.rbac", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, &rbacv3.RBAC{})}},
						{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, &routerv3.Router{})}},
					}
				})
			}
			cp := startControlPlane(b)
			be := startBackend(b, "bench")
			routes := routeConfig("ingress_http", vhost("bench.example.com", toCluster("bench", prefixMatch("/"))))
			if tc.policies != nil {
				routes.VirtualHosts[0].TypedPerFilterConfig = tc.policies(b)
			}
			cp.set("v1", resources{
				listeners: []*listenerv3.Listener{l},
				routes:    []*routev3.RouteConfiguration{routes},
				clusters:  []*clusterv3.Cluster{edsCluster("bench")},
				endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.addr())},
			})
			req := benchRequest(b, cp)
			req.Host = "bench.example.com"
			req.Header.Set("User-Agent", "bench")
			req.Header.Set("Accept", "*/*")
			req.Header.Set("Origin", "https://app.example.com")
			loopRequests(b, req)
		})
	}
}
