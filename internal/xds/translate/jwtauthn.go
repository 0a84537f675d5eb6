package translate

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/dag"
)

// JWTAuthnFilterName is Envoy's JWT authentication filter.
const JWTAuthnFilterName = "envoy.filters.http.jwt_authn"

// jwtAuthnFilter verifies JSON Web Tokens on the HTTPS server names whose
// HTTPProxy defines providers. Each provider is also a requirement of the same
// name, which routes select by name (PerRouteConfig): no route matching is
// repeated in the filter's configuration, and a route without per-route
// configuration requires nothing.
var jwtAuthnFilter = httpFilter{
	name:     JWTAuthnFilterName,
	listener: jwtAuthnListener,
	route:    jwtAuthnRoute,
}

func jwtAuthnListener(svh *dag.SecureVirtualHost, _ Options) *anypb.Any {
	if svh == nil || len(svh.JWTProviders) == 0 {
		return nil
	}
	cfg := &jwtv3.JwtAuthentication{
		Providers:      make(map[string]*jwtv3.JwtProvider, len(svh.JWTProviders)),
		RequirementMap: make(map[string]*jwtv3.JwtRequirement, len(svh.JWTProviders)),
	}
	for i := range svh.JWTProviders {
		p := &svh.JWTProviders[i]
		cfg.Providers[p.Name] = jwtProvider(p)
		cfg.RequirementMap[p.Name] = &jwtv3.JwtRequirement{
			RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: p.Name},
		}
	}
	return mustAny(cfg)
}

// jwtProvider leaves where the token is read from to Envoy's defaults (the
// Authorization header's Bearer value, else the access_token query parameter),
// as does the embedded proxy.
func jwtProvider(p *dag.JWTProvider) *jwtv3.JwtProvider {
	out := &jwtv3.JwtProvider{
		Issuer:    p.Issuer,
		Audiences: slices.Clone(p.Audiences),
		Forward:   p.ForwardJWT,
	}
	if p.RemoteJWKS == nil {
		out.JwksSourceSpecifier = &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{
			Specifier: &corev3.DataSource_InlineString{InlineString: p.LocalJWKS},
		}}
	}
	if r := p.RemoteJWKS; r != nil {
		out.JwksSourceSpecifier = &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{
			HttpUri: &corev3.HttpUri{
				Uri:              r.URI,
				HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: r.Cluster.Name},
				Timeout:          durationpb.New(r.Timeout),
			},
			CacheDuration: durationpb.New(r.CacheDuration),
		}}
	}
	return out
}

func jwtAuthnRoute(r *dag.Route, _ *dag.VirtualHost, _ Options) *anypb.Any {
	switch {
	case r.JWT.Provider != "":
		return mustAny(&jwtv3.PerRouteConfig{
			RequirementSpecifier: &jwtv3.PerRouteConfig_RequirementName{RequirementName: r.JWT.Provider},
		})
	case r.JWT.Disabled:
		return mustAny(&jwtv3.PerRouteConfig{
			RequirementSpecifier: &jwtv3.PerRouteConfig_Disabled{Disabled: true},
		})
	}
	return nil
}
