package localratelimit

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

var registry = filter.NewRegistry(&routerv3.Router{}, Factory{})

func anyOf(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var everyRequest = &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 100}}

// limit is a per-route configuration as the translator writes it.
func limit(max, perFill uint32, every time.Duration, status typev3.StatusCode) *localratelimitv3.LocalRateLimit {
	return &localratelimitv3.LocalRateLimit{
		StatPrefix:     "test",
		TokenBucket:    &typev3.TokenBucket{MaxTokens: max, TokensPerFill: wrapperspb.UInt32(perFill), FillInterval: durationpb.New(every)},
		Status:         &typev3.HttpStatus{Code: status},
		FilterEnabled:  everyRequest,
		FilterEnforced: everyRequest,
	}
}

// chain is a connection manager with the filter, as Portico configures it.
func chain(t testing.TB) *filter.Chain {
	t.Helper()
	c, err := registry.BuildChain([]*hcmv3.HttpFilter{
		{Name: Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &localratelimitv3.LocalRateLimit{StatPrefix: "http"})}},
		{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// perRoute parses a route's configuration at a place.
func perRoute(t testing.TB, m proto.Message, at filter.Place) filter.PerFilter {
	t.Helper()
	pf, err := registry.ParsePerFilterAt(map[string]*anypb.Any{Name: anyOf(t, m)}, at)
	if err != nil {
		t.Fatal(err)
	}
	return pf
}

func send(c *filter.Chain, env *filter.Env, pf filter.PerFilter) *filter.LocalReply {
	s := filter.NewStream(context.Background(), env)
	s.Request.Headers = filter.HeaderMap{}
	return c.Decode(s, pf)
}

// passes sends n requests and wants them all through.
func passes(t *testing.T, c *filter.Chain, env *filter.Env, pf filter.PerFilter, n int) {
	t.Helper()
	for i := range n {
		if lr := send(c, env, pf); lr != nil {
			t.Fatalf("request %d answered %d, want it through", i+1, lr.Status)
		}
	}
}

func limited(t *testing.T, c *filter.Chain, env *filter.Env, pf filter.PerFilter, status int) *filter.LocalReply {
	t.Helper()
	lr := send(c, env, pf)
	if lr == nil || lr.Status != status {
		t.Fatalf("request over the limit: %+v, want status %d", lr, status)
	}
	return lr
}

func TestLimitAnswersWithStatusAndHeaders(t *testing.T) {
	cfg := limit(3, 1, time.Hour, typev3.StatusCode_ServiceUnavailable)
	cfg.ResponseHeadersToAdd = []*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "x-limited", Value: "100%%"}, AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD},
		{Header: &corev3.HeaderValue{Key: "x-replaced", Value: "v"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
	}
	c, env := chain(t), &filter.Env{Shared: &sync.Map{}}
	pf := perRoute(t, cfg, filter.Place{VirtualHost: "h", Route: "r"})
	passes(t, c, env, pf, 3)
	lr := limited(t, c, env, pf, 503)
	want := []filter.HeaderValue{{Name: "x-limited", Value: "100%"}, {Name: "x-replaced", Value: "v", Overwrite: true}}
	if len(lr.Headers) != 2 || lr.Headers[0] != want[0] || lr.Headers[1] != want[1] {
		t.Errorf("headers %+v, want %+v", lr.Headers, want)
	}
	if lr.Body != "local_rate_limited" || lr.Filter != Name {
		t.Errorf("body %q from %q, want local_rate_limited from %s", lr.Body, lr.Filter, Name)
	}
	// A route without a configuration is not limited: the chain skips the filter.
	if !c.Idle(nil) {
		t.Error("the chain runs for routes without a rate limit")
	}
}

// Buckets are kept across swaps by place and shape; anything else is a new bucket.
func TestBucketsOutliveSwaps(t *testing.T) {
	c, env := chain(t), &filter.Env{Shared: &sync.Map{}}
	cfg := limit(2, 2, time.Hour, typev3.StatusCode_TooManyRequests)
	route := filter.Place{VirtualHost: "h", Route: "r"}
	passes(t, c, env, perRoute(t, cfg, route), 2)
	// The same policy, parsed again (a new configuration), still counts.
	limited(t, chain(t), env, perRoute(t, cfg, route), 429)

	// Another status or header is the same bucket.
	other := proto.Clone(cfg).(*localratelimitv3.LocalRateLimit)
	other.Status = &typev3.HttpStatus{Code: typev3.StatusCode_ServiceUnavailable}
	limited(t, chain(t), env, perRoute(t, other, route), 503)

	// Another place, or another shape, is another bucket.
	passes(t, c, env, perRoute(t, cfg, filter.Place{VirtualHost: "h", Route: "r2"}), 2)
	passes(t, c, env, perRoute(t, cfg, filter.Place{VirtualHost: "h"}), 2)
	passes(t, c, env, perRoute(t, cfg, filter.Place{VirtualHost: "h2", Route: "r"}), 2)
	passes(t, c, env, perRoute(t, limit(3, 2, time.Hour, typev3.StatusCode_TooManyRequests), route), 3)

	// Without a place to keep it, a configuration has a bucket of its own.
	pf, err := registry.ParsePerFilter(map[string]*anypb.Any{Name: anyOf(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	passes(t, c, env, pf, 2)
	limited(t, c, env, pf, 429)
}

// One virtual host's configuration is one bucket for all its routes.
func TestVirtualHostBucketIsShared(t *testing.T) {
	c, env := chain(t), &filter.Env{Shared: &sync.Map{}}
	vh := perRoute(t, limit(3, 3, time.Hour, typev3.StatusCode_TooManyRequests), filter.Place{VirtualHost: "h"})
	// Routes without a configuration of their own get the host's (filter.Merge).
	a, b := filter.Merge(nil, vh), filter.Merge(nil, vh)
	passes(t, c, env, a, 2)
	passes(t, c, env, b, 1)
	limited(t, c, env, a, 429)
	limited(t, c, env, b, 429)
}

func TestBucketRefills(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newBucket(bucketSpec{max: 3, perFill: 2, interval: time.Second}, start)
	for i := range 3 {
		if !b.take(start) {
			t.Fatalf("take %d of a full bucket of 3 failed", i+1)
		}
	}
	if b.take(start.Add(999 * time.Millisecond)) {
		t.Fatal("a token before the first fill")
	}
	// One fill: 2 tokens, on the grid of the bucket's start.
	at := start.Add(1500 * time.Millisecond)
	if got := takeAll(b, at); got != 2 {
		t.Fatalf("a fill added %d tokens, want tokens_per_fill (2)", got)
	}
	if b.take(start.Add(1999 * time.Millisecond)) {
		t.Fatal("the next fill came early: fills are every interval from the start, not from the last take")
	}
	// Many fills never go above max_tokens.
	at = start.Add(time.Hour)
	if !b.full(at) {
		t.Fatal("not full after an hour")
	}
	if got := takeAll(b, at); got != 3 {
		t.Fatalf("%d tokens after many fills, want max_tokens (3)", got)
	}
}

// takeAll empties b at a time and says how many tokens it had.
func takeAll(b *bucket, at time.Time) (n int) {
	for b.take(at) {
		n++
	}
	return n
}

// Full buckets are forgotten when a new one is kept: a full bucket is a new one, and the
// buckets of removed routes must not pile up.
func TestSweepForgetsFullBuckets(t *testing.T) {
	shared := &sync.Map{}
	env := &filter.Env{Shared: shared}
	c := chain(t)
	cfg := limit(1, 1, 50*time.Millisecond, typev3.StatusCode_TooManyRequests)
	passes(t, c, env, perRoute(t, cfg, filter.Place{VirtualHost: "old"}), 1)
	kept := limit(5, 5, time.Hour, typev3.StatusCode_TooManyRequests)
	passes(t, c, env, perRoute(t, kept, filter.Place{VirtualHost: "kept"}), 1)
	count := func() (n int) {
		shared.Range(func(any, any) bool { n++; return true })
		return n
	}
	if n := count(); n != 2 {
		t.Fatalf("%d buckets kept, want 2", n)
	}
	// Once "old" is full again (50ms), a new bucket sweeps it; "kept" is not full.
	oldKey := bucketKey{filter: Name, at: filter.Place{VirtualHost: "old"}, spec: bucketSpec{1, 1, 50 * time.Millisecond}}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if _, ok := shared.Load(oldKey); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the full bucket was never forgotten")
		}
		time.Sleep(60 * time.Millisecond)
		passes(t, c, env, perRoute(t, kept, filter.Place{VirtualHost: "new", Route: strings.Repeat("x", i)}), 1)
	}
	if _, ok := shared.Load(bucketKey{filter: Name, at: filter.Place{VirtualHost: "kept"}, spec: bucketSpec{5, 5, time.Hour}}); !ok {
		t.Error("a bucket in use and not full was forgotten")
	}
}

func TestEnabledAndEnforced(t *testing.T) {
	c, env := chain(t), &filter.Env{Shared: &sync.Map{}}
	// Envoy's defaults: without filter_enabled, the filter does nothing.
	off := limit(1, 1, time.Hour, typev3.StatusCode_TooManyRequests)
	off.FilterEnabled = nil
	passes(t, c, env, perRoute(t, off, filter.Place{VirtualHost: "off"}), 5)
	// Without filter_enforced, it counts and lets everything through.
	shadow := limit(1, 1, time.Hour, typev3.StatusCode_TooManyRequests)
	shadow.FilterEnforced = nil
	passes(t, c, env, perRoute(t, shadow, filter.Place{VirtualHost: "shadow"}), 5)
}

func TestRefusedConfigurations(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*localratelimitv3.LocalRateLimit)
		want string
	}{
		{"descriptors", func(m *localratelimitv3.LocalRateLimit) {
			m.Descriptors = []*commonv3.LocalRateLimitDescriptor{{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}, TokenBucket: m.TokenBucket}}
		}, "descriptors is not supported"},
		{"per connection", func(m *localratelimitv3.LocalRateLimit) { m.LocalRateLimitPerDownstreamConnection = true }, "local_rate_limit_per_downstream_connection is not supported"},
		{"x-ratelimit headers", func(m *localratelimitv3.LocalRateLimit) {
			m.EnableXRatelimitHeaders = commonv3.XRateLimitHeadersRFCVersion_DRAFT_VERSION_03
		}, "enable_x_ratelimit_headers is not supported"},
		{"formatted header", func(m *localratelimitv3.LocalRateLimit) {
			m.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x", Value: "%REQ(x)%"}}}
		}, "only literal values"},
		{"no bucket", func(m *localratelimitv3.LocalRateLimit) { m.TokenBucket = nil }, "token_bucket is required"},
		{"invalid", func(m *localratelimitv3.LocalRateLimit) { m.TokenBucket.FillInterval = durationpb.New(0) }, "FillInterval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := limit(1, 1, time.Hour, typev3.StatusCode_TooManyRequests)
			tc.edit(m)
			_, err := registry.ParsePerFilter(map[string]*anypb.Any{Name: anyOf(t, m)})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A connection manager's own bucket limits every route without one.
func TestConnectionManagerBucket(t *testing.T) {
	c, err := registry.BuildChain([]*hcmv3.HttpFilter{
		{Name: Name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, limit(2, 2, time.Hour, typev3.StatusCode_TooManyRequests))}},
		{Name: "router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: anyOf(t, &routerv3.Router{})}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := &filter.Env{Shared: &sync.Map{}}
	if c.Idle(nil) {
		t.Fatal("the chain skips the filter on routes without configuration")
	}
	passes(t, c, env, nil, 2)
	limited(t, c, env, nil, 429)
}

// BenchmarkDecode is the filter's own cost on a request (no I/O): a route with a
// bucket that never runs out, and one without a policy (the chain skips the filter),
// one request at a time and from all CPUs at once on one bucket.
func BenchmarkDecode(b *testing.B) {
	c, env := chain(b), &filter.Env{Shared: &sync.Map{}}
	limited := perRoute(b, limit(1<<31, 1<<31, time.Hour, typev3.StatusCode_TooManyRequests), filter.Place{VirtualHost: "h"})
	run := func(pf filter.PerFilter) func(*testing.B) {
		return func(b *testing.B) {
			s := filter.NewStream(context.Background(), env)
			s.Request.Headers = filter.HeaderMap{}
			b.ReportAllocs()
			for b.Loop() {
				if !c.Idle(pf) && c.Decode(s, pf) != nil {
					b.Fatal("limited")
				}
			}
		}
	}
	b.Run("no-policy", run(nil))
	b.Run("policy", run(limited))
	b.Run("policy-parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			s := filter.NewStream(context.Background(), env)
			s.Request.Headers = filter.HeaderMap{}
			for pb.Next() {
				if c.Decode(s, limited) != nil {
					b.Error("limited")
					return
				}
			}
		})
	})
}
