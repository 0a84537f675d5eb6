package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// localRateLimitFilter is Envoy's local rate limit: in every connection manager
// without a bucket of its own (which would limit every route), it limits the routes
// and virtual hosts whose typed_per_filter_config gives it one.
var localRateLimitFilter = httpFilter{
	name: "envoy.filters.http.local_ratelimit",
	listener: func(*dag.SecureVirtualHost, Options) *anypb.Any {
		return mustAny(&localratelimitv3.LocalRateLimit{StatPrefix: "http_local_rate_limiter"})
	},
	vhost: func(vh *dag.VirtualHost, _ Options) *anypb.Any {
		return localRateLimit(vh.RateLimit, "vhost_"+vh.Name)
	},
	route: func(r *dag.Route, vh *dag.VirtualHost, _ Options) *anypb.Any {
		return localRateLimit(r.RateLimit, "vhost_"+vh.Name)
	},
}

// localRateLimit is a per-route configuration of the local rate limit filter; nil
// when p has no local limit.
func localRateLimit(p *dag.RateLimitPolicy, statPrefix string) *anypb.Any {
	if p == nil || p.Local == nil {
		return nil
	}
	l := p.Local
	all := &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}}
	cfg := &localratelimitv3.LocalRateLimit{
		StatPrefix: statPrefix,
		TokenBucket: &typev3.TokenBucket{
			MaxTokens:     l.MaxTokens,
			TokensPerFill: wrapperspb.UInt32(l.TokensPerFill),
			FillInterval:  durationpb.New(l.FillInterval),
		},
		Status:         &typev3.HttpStatus{Code: typev3.StatusCode(l.Status)},
		FilterEnabled:  all,
		FilterEnforced: all,
	}
	for _, h := range l.ResponseHeaders {
		cfg.ResponseHeadersToAdd = appendHeader(cfg.ResponseHeadersToAdd, h, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD)
	}
	return mustAny(cfg)
}
