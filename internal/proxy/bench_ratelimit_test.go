package proxy

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkProxyRequestLocalRateLimit is BenchmarkProxyRequest without HTTP
// filters, with the local rate limit filter in the connection manager as
// Portico sends it (no bucket: the route has no policy), and with a bucket on
// the virtual host large enough never to run out.
func BenchmarkProxyRequestLocalRateLimit(b *testing.B) {
	withFilter := func(b *testing.B) *hcmv3.HttpFilter {
		return &hcmv3.HttpFilter{
			Name:       "envoy.filters.http.local_ratelimit",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(b, &localratelimitv3.LocalRateLimit{StatPrefix: "http"})},
		}
	}
	b.Run("no-filters", func(b *testing.B) {
		benchmarkProxyRequest(b, httpListener(b), nil)
	})
	b.Run("filter-no-policy", func(b *testing.B) {
		l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
			h.HttpFilters = append([]*hcmv3.HttpFilter{withFilter(b)}, h.HttpFilters...)
		})
		benchmarkProxyRequest(b, l, nil)
	})
	b.Run("host-policy", func(b *testing.B) {
		l := modifyHCM(b, func(h *hcmv3.HttpConnectionManager) {
			h.HttpFilters = append([]*hcmv3.HttpFilter{withFilter(b)}, h.HttpFilters...)
		})
		all := &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100}}
		policy := mustAny(b, &localratelimitv3.LocalRateLimit{
			StatPrefix:     "vhost",
			TokenBucket:    &typev3.TokenBucket{MaxTokens: 1 << 31, TokensPerFill: wrapperspb.UInt32(1 << 31), FillInterval: durationpb.New(time.Hour)},
			FilterEnabled:  all,
			FilterEnforced: all,
		})
		benchmarkProxyRequest(b, l, func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.local_ratelimit": policy}
		})
	})
}
