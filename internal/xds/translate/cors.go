package translate

import (
	"strings"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// corsFilterName is Envoy's CORS filter.
const corsFilterName = "envoy.filters.http.cors"

// corsFilter is in every connection manager; the policies are per virtual host
// (HTTPProxy) and route (Gateway API).
var corsFilter = httpFilter{
	name:     corsFilterName,
	listener: func(*dag.SecureVirtualHost, Options) *anypb.Any { return mustAny(&corsv3.Cors{}) },
	vhost: func(vh *dag.VirtualHost, _ Options) *anypb.Any {
		return corsPolicy(vh.CORS)
	},
	route: func(r *dag.Route, _ *dag.VirtualHost, _ Options) *anypb.Any {
		return corsPolicy(r.CORS)
	},
}

// corsPolicy is a CORS policy as the filter's per-route configuration. A regex
// origin must match the whole Origin header, as Envoy's matchers do.
func corsPolicy(p *dag.CORSPolicy) *anypb.Any {
	if p == nil {
		return nil
	}
	out := &corsv3.CorsPolicy{
		AllowMethods:  strings.Join(p.AllowMethods, ","),
		AllowHeaders:  strings.Join(p.AllowHeaders, ","),
		ExposeHeaders: strings.Join(p.ExposeHeaders, ","),
		MaxAge:        p.MaxAge,
	}
	for _, o := range p.AllowOrigins {
		var m *matcherv3.StringMatcher
		switch {
		case o.Any:
			// Envoy allows every origin when a matcher matches "*".
			m = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "*"}}
		case o.Regex != "":
			m = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: o.Regex}}}
		default:
			m = &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: o.Exact}}
		}
		out.AllowOriginStringMatch = append(out.AllowOriginStringMatch, m)
	}
	if p.AllowCredentials {
		out.AllowCredentials = wrapperspb.Bool(true)
	}
	if p.AllowPrivateNetwork {
		out.AllowPrivateNetworkAccess = wrapperspb.Bool(true)
	}
	if p.AnswerRefusedPreflights {
		out.ForwardNotMatchingPreflights = wrapperspb.Bool(false)
	}
	return mustAny(out)
}
