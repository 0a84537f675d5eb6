package proxy

import (
	"net/url"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/testutil"
)

// BenchmarkProxyRequestJWT is BenchmarkProxyRequest with jwt_authn in the
// connection manager: "none" without it, "unused" with it on a route that
// requires no token (the chain is skipped), "verified" with every request's
// token verified (an ES256 signature; the key set cached after the first
// request), all in one run.
func BenchmarkProxyRequestJWT(b *testing.B) {
	jwks := testutil.StartJWKS(b, "127.0.0.1")
	token := jwks.Token(testutil.Claims("https://issuer.test", "api"))
	withJWT := func(b *testing.B) *listenerv3.Listener {
		return modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
			cfg := &jwtv3.JwtAuthentication{
				Providers: map[string]*jwtv3.JwtProvider{"p": {
					Issuer: "https://issuer.test", Audiences: []string{"api"},
					JwksSourceSpecifier: &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{
						HttpUri: &corev3.HttpUri{Uri: jwks.URL, HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "jwks"}},
					}},
				}},
				RequirementMap: map[string]*jwtv3.JwtRequirement{"p": {RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "p"}}},
			}
			h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.jwt_authn", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, cfg)}}}, h.HttpFilters...)
		})
	}
	require := mustAny(b, &jwtv3.PerRouteConfig{RequirementSpecifier: &jwtv3.PerRouteConfig_RequirementName{RequirementName: "p"}})
	b.Run("none", func(b *testing.B) {
		benchmarkProxyRequestJWT(b, httpListener(b), nil, jwks.URL, "")
	})
	b.Run("unused", func(b *testing.B) {
		benchmarkProxyRequestJWT(b, withJWT(b), nil, jwks.URL, "")
	})
	b.Run("verified", func(b *testing.B) {
		benchmarkProxyRequestJWT(b, withJWT(b), require, jwks.URL, token)
	})
}

// benchmarkProxyRequestJWT is benchmarkProxyRequest with a jwks cluster
// reaching the key set's server, perRoute (when not nil) on every route, and
// token as the request's Bearer credential.
func benchmarkProxyRequestJWT(b *testing.B, l *listenerv3.Listener, perRoute *anypb.Any, jwksURL, token string) {
	cp := startControlPlane(b)
	be := startBackend(b, "bench")
	routes := routeConfig("ingress_http", vhost("*", toCluster("bench", prefixMatch("/"))))
	if perRoute != nil {
		for _, r := range routes.VirtualHosts[0].Routes {
			r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.jwt_authn": perRoute}
		}
	}
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes:    []*routev3.RouteConfiguration{routes},
		clusters:  []*clusterv3.Cluster{edsCluster("bench"), edsCluster("jwks")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("bench", be.addr()), assignment("jwks", hostPortOf(b, jwksURL))},
	})
	req := benchRequest(b, cp)
	req.Host = "bench.example.com"
	req.Header.Set("User-Agent", "bench")
	req.Header.Set("Accept", "*/*")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	loopRequests(b, req)
}

// hostPortOf is the host:port of an http URL.
func hostPortOf(b *testing.B, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	return u.Host
}
