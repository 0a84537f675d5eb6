package proxy

import (
	"context"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The proxy answers a gRPC request itself in gRPC's form, as Envoy's
// sendLocalReply does: a trailers-only 200 whose grpc-status is the HTTP
// status's (or the one a filter asks for) and whose grpc-message is the reply's
// body. A gRPC client then reports what happened, not a protocol error.
func TestGRPCLocalReplies(t *testing.T) {
	cp := startControlPlane(t)
	all := &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100}}
	limit := func(exhausted bool) *anypb.Any {
		return mustAny(t, &localratelimitv3.LocalRateLimit{
			StatPrefix:                     "limited",
			TokenBucket:                    &typev3.TokenBucket{MaxTokens: 1, TokensPerFill: wrapperspb.UInt32(1), FillInterval: durationpb.New(time.Hour)},
			FilterEnabled:                  all,
			FilterEnforced:                 all,
			RateLimitedAsResourceExhausted: exhausted,
		})
	}
	limited := func(prefix string, exhausted bool) *routev3.Route {
		r := toCluster("down", prefixMatch(prefix))
		r.TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.local_ratelimit": limit(exhausted)}
		return r
	}
	l := modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.HttpFilters = append([]*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.local_ratelimit",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &localratelimitv3.LocalRateLimit{StatPrefix: "http"})},
		}}, h.HttpFilters...)
	})
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("grpc.example.com",
			limited("/exhausted.", true),
			limited("/limited.", false),
			toCluster("down", prefixMatch("/grpc.health.v1.Health/")),
		))},
		clusters:  []*clusterv3.Cluster{edsCluster("down")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("down")},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")

	conn, err := grpc.NewClient("passthrough:///"+p.ListenerAddr("ingress_http"),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	call := func(method string) *status.Status {
		err := conn.Invoke(ctx, method, &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{})
		return status.Convert(err)
	}
	for _, c := range []struct {
		method, what string
		code         codes.Code
		message      string
	}{
		{"/grpc.health.v1.Health/Check", "no endpoint: 503", codes.Unavailable, "no healthy upstream"},
		{"/other.Service/Call", "no route: 404", codes.Unimplemented, ""},
		{"/limited.Service/Call", "the first request within the limit, no endpoint", codes.Unavailable, "no healthy upstream"},
		{"/limited.Service/Call", "over the limit: 429", codes.Unavailable, "local_rate_limited"},
		{"/exhausted.Service/Call", "the first request within the limit, no endpoint", codes.Unavailable, "no healthy upstream"},
		{"/exhausted.Service/Call", "over the limit, rate_limited_as_resource_exhausted", codes.ResourceExhausted, "local_rate_limited"},
	} {
		if st := call(c.method); st.Code() != c.code || st.Message() != c.message {
			t.Errorf("%s (%s): %v %q, want %v %q", c.method, c.what, st.Code(), st.Message(), c.code, c.message)
		}
	}
}
