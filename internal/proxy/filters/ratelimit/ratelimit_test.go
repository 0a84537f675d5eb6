package ratelimit

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/testutil"
)

// The filter against the real envoyproxy/ratelimit service on a real Redis. Every limit
// is per hour: no counter resets during a test.

const serviceConfig = `
domain: portico
descriptors:
- key: generic_key
  value: shared
  rate_limit: {unit: hour, requests_per_unit: 2}
- key: user
  value: alice
  rate_limit: {unit: hour, requests_per_unit: 1}
- key: header_match
  value: beta
  rate_limit: {unit: hour, requests_per_unit: 1}
- key: remote_address
  rate_limit: {unit: hour, requests_per_unit: 3}
- key: generic_key
  value: vhost
  rate_limit: {unit: hour, requests_per_unit: 1}
`

// upstreams reaches "rls" at a fixed address over gRPC, as the proxy's cluster would.
type upstreams struct {
	addr string
	once sync.Once
	conn *grpc.ClientConn
	err  error
}

func (u *upstreams) GRPC(cluster string) (grpc.ClientConnInterface, error) {
	u.once.Do(func() {
		u.conn, u.err = grpc.NewClient(u.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	})
	return u.conn, u.err
}
func (u *upstreams) HTTP(string) (*http.Client, error)              { return nil, nil }
func (u *upstreams) Dial(context.Context, string) (net.Conn, error) { return nil, nil }

func anyOf(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var registry = filter.NewRegistry(&routerv3.Router{}, Factory{})

func config(failClosed bool) *ratelimitv3.RateLimit {
	return &ratelimitv3.RateLimit{
		Domain:          "portico",
		Timeout:         durationpb.New(30 * time.Second), // a generous deadline: never a measure of speed
		FailureModeDeny: failClosed,
		RateLimitService: &ratelimitconfv3.RateLimitServiceConfig{
			GrpcService:         &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "rls"}}},
			TransportApiVersion: corev3.ApiVersion_V3,
		},
	}
}

func chain(t testing.TB, cfg *ratelimitv3.RateLimit) *filter.Chain {
	t.Helper()
	c, err := registry.BuildChain([]*hcmv3.HttpFilter{
		{Name: Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, cfg)}},
		{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func limits(t testing.TB, rls ...*routev3.RateLimit) []Limit {
	t.Helper()
	l, err := ParseLimits(rls)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func genericKey(v string) *routev3.RateLimit {
	return &routev3.RateLimit{Actions: []*routev3.RateLimit_Action{{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{GenericKey: &routev3.RateLimit_Action_GenericKey{DescriptorValue: v}}}}}
}

// request is one request through the chain; headers are name, value pairs.
type request struct {
	c      *filter.Chain
	env    *filter.Env
	limits *RouteLimits
	per    filter.PerFilter
	client string
}

func (r request) send(headers ...string) (*filter.LocalReply, []filter.HeaderValue) {
	s := filter.NewStream(context.Background(), r.env)
	h := filter.HeaderMap{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Add(headers[i], headers[i+1])
	}
	s.Request.Headers = h
	s.Request.Client = netip.MustParseAddr(r.client)
	s.Route = filter.Route{Matched: true, RateLimits: r.limits}
	return r.c.Decode(s, r.per), s.ResponseHeaders()
}

func (r request) wantThrough(t *testing.T, n int, headers ...string) {
	t.Helper()
	for i := range n {
		if lr, _ := r.send(headers...); lr != nil {
			t.Fatalf("request %d %v: answered %d, want it through", i+1, headers, lr.Status)
		}
	}
}

func (r request) wantLimited(t *testing.T, headers ...string) *filter.LocalReply {
	t.Helper()
	lr, _ := r.send(headers...)
	if lr == nil || lr.Status != http.StatusTooManyRequests {
		t.Fatalf("request %v: %+v, want 429", headers, lr)
	}
	return lr
}

func TestGlobalRateLimit(t *testing.T) {
	rls := testutil.StartRateLimit(t, testutil.StartRedis(t), serviceConfig)
	env := &filter.Env{Upstreams: &upstreams{addr: rls.GRPCAddr}}
	c := chain(t, config(false))

	t.Run("a descriptor shared by two routes", func(t *testing.T) {
		a := request{c: c, env: env, client: "192.0.2.1", limits: &RouteLimits{Route: limits(t, genericKey("shared"))}}
		b := a
		b.limits = &RouteLimits{Route: limits(t, genericKey("shared"))}
		a.wantThrough(t, 1)
		b.wantThrough(t, 1)
		lr := a.wantLimited(t)
		found := false
		for _, h := range lr.Headers {
			found = found || (h.Name == "x-envoy-ratelimited" && h.Value == "true")
		}
		if !found {
			t.Errorf("headers %+v, want x-envoy-ratelimited: true", lr.Headers)
		}
		b.wantLimited(t)
	})
	t.Run("request header", func(t *testing.T) {
		r := request{c: c, env: env, client: "192.0.2.1", limits: &RouteLimits{Route: limits(t, &routev3.RateLimit{Actions: []*routev3.RateLimit_Action{{
			ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{HeaderName: "x-user", DescriptorKey: "user"}},
		}}})}}
		r.wantThrough(t, 1, "x-user", "alice")
		r.wantLimited(t, "x-user", "alice")
		r.wantThrough(t, 3) // no header: no descriptor, nothing asked
		r.wantThrough(t, 3, "x-user", "bob")
	})
	t.Run("header value match", func(t *testing.T) {
		r := request{c: c, env: env, client: "192.0.2.1", limits: &RouteLimits{Route: limits(t, &routev3.RateLimit{Actions: []*routev3.RateLimit_Action{{
			ActionSpecifier: &routev3.RateLimit_Action_HeaderValueMatch_{HeaderValueMatch: &routev3.RateLimit_Action_HeaderValueMatch{
				DescriptorValue: "beta",
				Headers: []*routev3.HeaderMatcher{{Name: "x-channel", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
					StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "beta"}},
				}}},
			}},
		}}})}}
		r.wantThrough(t, 1, "x-channel", "beta-2")
		r.wantLimited(t, "x-channel", "beta-3")
		r.wantThrough(t, 2, "x-channel", "stable")
	})
	t.Run("remote address", func(t *testing.T) {
		r := request{c: c, env: env, client: "198.51.100.7", limits: &RouteLimits{Route: limits(t, &routev3.RateLimit{Actions: []*routev3.RateLimit_Action{{
			ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}},
		}}})}}
		r.wantThrough(t, 3)
		r.wantLimited(t)
		other := r
		other.client = "198.51.100.8"
		other.wantThrough(t, 3)
	})
	t.Run("virtual host limits", func(t *testing.T) {
		vh := limits(t, genericKey("vhost"))
		inherit := request{c: c, env: env, client: "192.0.2.1", limits: &RouteLimits{VirtualHost: vh}}
		inherit.wantThrough(t, 1)
		inherit.wantLimited(t)
		// A route with limits of its own overrides the host's (Envoy's default)...
		own := request{c: c, env: env, client: "192.0.2.1", limits: &RouteLimits{Route: limits(t, genericKey("unlimited")), VirtualHost: vh}}
		own.wantThrough(t, 3)
		// ...unless RateLimitPerRoute includes them; IGNORE drops them.
		per := func(o ratelimitv3.RateLimitPerRoute_VhRateLimitsOptions) filter.PerFilter {
			pf, err := registry.ParsePerFilter(map[string]*anypb.Any{Name: anyOf(t, &ratelimitv3.RateLimitPerRoute{VhRateLimits: o})})
			if err != nil {
				t.Fatal(err)
			}
			return pf
		}
		own.per = per(ratelimitv3.RateLimitPerRoute_INCLUDE)
		own.wantLimited(t)
		ignore := request{c: c, env: env, client: "192.0.2.1", limits: &RouteLimits{VirtualHost: vh}, per: per(ratelimitv3.RateLimitPerRoute_IGNORE)}
		ignore.wantThrough(t, 3)
	})
	t.Run("x-ratelimit headers", func(t *testing.T) {
		cfg := config(false)
		cfg.EnableXRatelimitHeaders = ratelimitv3.RateLimit_DRAFT_VERSION_03
		r := request{c: chain(t, cfg), env: env, client: "203.0.113.9", limits: &RouteLimits{Route: limits(t, &routev3.RateLimit{Actions: []*routev3.RateLimit_Action{{
			ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}},
		}}})}}
		_, hs := r.send()
		got := map[string]string{}
		for _, h := range hs {
			got[h.Name] = h.Value
		}
		if got["X-RateLimit-Limit"] != "3, 3;w=3600" || got["X-RateLimit-Remaining"] != "2" || got["X-RateLimit-Reset"] == "" {
			t.Errorf("response headers %v, want X-RateLimit-Limit 3, 3;w=3600, Remaining 2 and a Reset", got)
		}
	})
}

// The service down: the request goes through with failure_mode_deny false (failOpen),
// and is answered 500 with it true.
func TestRateLimitServiceDown(t *testing.T) {
	env := &filter.Env{Upstreams: &upstreams{addr: testutil.RefusedAddr(t)}}
	for _, failClosed := range []bool{false, true} {
		cfg := config(failClosed)
		cfg.Timeout = durationpb.New(5 * time.Second)
		r := request{c: chain(t, cfg), env: env, client: "192.0.2.1", limits: &RouteLimits{Route: limits(t, genericKey("shared"))}}
		lr, _ := r.send()
		switch {
		case !failClosed && lr != nil:
			t.Errorf("fail open: answered %d, want the request through", lr.Status)
		case failClosed && (lr == nil || lr.Status != http.StatusInternalServerError):
			t.Errorf("fail closed: %+v, want 500", lr)
		}
	}
}

func TestRefusedConfigurations(t *testing.T) {
	cfg := config(false)
	cfg.RateLimitService.GrpcService = &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{TargetUri: "x", StatPrefix: "x"}}}
	if _, err := registry.BuildChain([]*hcmv3.HttpFilter{
		{Name: Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, cfg)}},
		{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})}},
	}); err == nil {
		t.Error("google_grpc accepted; only envoy_grpc (a cluster) can be reached")
	}
	for _, rl := range []*routev3.RateLimit{
		{Stage: wrapperspb.UInt32(1), Actions: genericKey("x").Actions},
		{Actions: []*routev3.RateLimit_Action{{ActionSpecifier: &routev3.RateLimit_Action_SourceCluster_{SourceCluster: &routev3.RateLimit_Action_SourceCluster{}}}}},
	} {
		if _, err := ParseLimits([]*routev3.RateLimit{rl}); err == nil {
			t.Errorf("%v accepted", rl)
		}
	}
}

// BenchmarkDecode is the filter's cost on a request: a route without rate_limits (the
// filter returns at once), and a route with a descriptor, which is one call to the real
// service over gRPC on loopback (its limit never reached).
func BenchmarkDecode(b *testing.B) {
	rls := testutil.StartRateLimit(b, testutil.StartRedis(b), `
domain: portico
descriptors:
- key: generic_key
  value: bench
  rate_limit: {unit: hour, requests_per_unit: 1000000000}
`)
	env := &filter.Env{Upstreams: &upstreams{addr: rls.GRPCAddr}}
	c := chain(b, config(false))
	for _, tc := range []struct {
		name   string
		limits *RouteLimits
	}{
		{"no-rate-limits", nil},
		{"one-descriptor", &RouteLimits{Route: limits(b, genericKey("bench"))}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := request{c: c, env: env, client: "192.0.2.1", limits: tc.limits}
			b.ReportAllocs()
			for b.Loop() {
				if lr, _ := r.send(); lr != nil {
					b.Fatalf("answered %d", lr.Status)
				}
			}
		})
	}
}
