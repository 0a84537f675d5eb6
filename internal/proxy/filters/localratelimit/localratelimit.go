// Package localratelimit is Envoy's envoy.filters.http.local_ratelimit for
// the embedded proxy: a token bucket per virtual host or route that
// configures one, kept by this proxy alone. A request takes a token; one
// that finds the bucket empty is answered the configured status (429 by
// default) with the configured headers.
//
// A bucket outlives configuration swaps while its place (the virtual host's
// name and the route's) and its token bucket (max_tokens, tokens_per_fill,
// fill_interval) stay the same: the control plane sends a new route
// configuration whenever any object changes, and that must not hand every
// client a full bucket again.
package localratelimit

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	localratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.http.local_ratelimit"

// Factory makes the filter; register it in the proxy's registry.
type Factory struct{}

func (Factory) Name() string                { return Name }
func (Factory) ConfigType() proto.Message   { return &localratelimitv3.LocalRateLimit{} }
func (Factory) PerRouteType() proto.Message { return &localratelimitv3.LocalRateLimit{} }

// New converts the connection manager's configuration. Without a token
// bucket (Portico's), it limits only the routes configured per route.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	c, err := parse(a)
	if err != nil {
		return nil, err
	}
	if c.bucket == nil {
		return &Filter{}, nil
	}
	c.own.Store(newBucket(*c.bucket, time.Now()))
	return &Filter{all: c}, nil
}

// ParsePerRoute converts a route's or virtual host's configuration.
func (Factory) ParsePerRoute(a *anypb.Any) (any, error) {
	c, err := parse(a)
	if err != nil {
		return nil, err
	}
	if c.bucket == nil {
		return nil, errors.New("token_bucket is required in a virtual host's or route's configuration")
	}
	return c, nil
}

// Filter limits requests by their route's bucket.
type Filter struct {
	// all, when set, limits the routes without a configuration of their own.
	all *config
}

// RouteScoped: without a bucket of the connection manager's, only the
// routes that configure one are limited.
func (f *Filter) RouteScoped() bool { return f.all == nil }

// DecodeHeaders takes a token from the request's bucket.
func (f *Filter) DecodeHeaders(s *filter.Stream, perRoute any) *filter.LocalReply {
	c, _ := perRoute.(*config)
	if c == nil {
		c = f.all
	}
	if c == nil || !c.enabled.sample() {
		return nil
	}
	if c.bucketFor(s.Env).take(time.Now()) || !c.enforced.sample() {
		return nil
	}
	return &filter.LocalReply{Status: c.status, GRPCStatus: c.grpcStatus, Body: "local_rate_limited", Headers: c.headers, Details: "local_rate_limited"}
}

// config is one LocalRateLimit, converted.
type config struct {
	bucket            *bucketSpec // nil: none
	status            int
	grpcStatus        int // of a limited gRPC request; 0: status's
	headers           []filter.HeaderValue
	enabled, enforced fraction

	// key finds its bucket in Env.Shared: where it is configured, and the
	// bucket's shape.
	key bucketKey
	// own is its bucket once found (or made, without Env.Shared).
	own atomic.Pointer[bucket]
}

// SetPlace records where the configuration is, which with its token bucket
// keys the bucket kept across configuration swaps.
func (c *config) SetPlace(filterName string, at filter.Place) {
	c.key = bucketKey{filter: filterName, at: at, spec: *c.bucket}
}

// bucketFor finds the configuration's bucket: the one kept for its key
// when there is one, so that a swap to the same policy keeps counting.
func (c *config) bucketFor(env *filter.Env) *bucket {
	if b := c.own.Load(); b != nil {
		return b
	}
	now := time.Now()
	b := newBucket(*c.bucket, now)
	if env != nil && env.Shared != nil && c.key.filter != "" {
		v, ok := env.Shared.Load(c.key)
		if !ok {
			sweep(env.Shared, now)
			v, _ = env.Shared.LoadOrStore(c.key, b)
		}
		b = v.(*bucket)
	}
	c.own.CompareAndSwap(nil, b)
	return c.own.Load()
}

// sweep forgets the kept buckets that are full: a full bucket is the same
// as a new one, so forgetting it loses nothing, and the buckets of removed
// routes do not pile up.
func sweep(shared *sync.Map, now time.Time) {
	shared.Range(func(k, v any) bool {
		if _, ok := k.(bucketKey); ok && v.(*bucket).full(now) {
			shared.Delete(k)
		}
		return true
	})
}

type bucketKey struct {
	filter string
	at     filter.Place
	spec   bucketSpec
}

func parse(a *anypb.Any) (*config, error) {
	var m localratelimitv3.LocalRateLimit
	if err := filter.Unmarshal(a, &m); err != nil {
		return nil, err
	}
	if err := filter.Unsupported(
		filter.Field{Name: "descriptors", Set: len(m.GetDescriptors()) > 0},
		filter.Field{Name: "rate_limits", Set: len(m.GetRateLimits()) > 0},
		filter.Field{Name: "stage", Set: m.GetStage() != 0},
		filter.Field{Name: "local_rate_limit_per_downstream_connection", Set: m.GetLocalRateLimitPerDownstreamConnection()},
		filter.Field{Name: "local_cluster_rate_limit", Set: m.GetLocalClusterRateLimit() != nil},
		filter.Field{Name: "enable_x_ratelimit_headers", Set: m.GetEnableXRatelimitHeaders() != 0},
		filter.Field{Name: "request_headers_to_add_when_not_enforced", Set: len(m.GetRequestHeadersToAddWhenNotEnforced()) > 0},
		filter.Field{Name: "enable_retry_after_header", Set: m.GetEnableRetryAfterHeader()},
	); err != nil {
		return nil, err
	}
	c := &config{status: http.StatusTooManyRequests}
	if tb := m.GetTokenBucket(); tb != nil {
		c.bucket = &bucketSpec{max: tb.GetMaxTokens(), perFill: tb.GetMaxTokens(), interval: tb.GetFillInterval().AsDuration()}
		if tb.GetTokensPerFill() != nil {
			c.bucket.perFill = tb.GetTokensPerFill().GetValue()
		}
		if c.bucket.interval <= 0 {
			return nil, errors.New("token_bucket.fill_interval must be positive")
		}
	}
	if st := m.GetStatus(); st != nil {
		c.status = int(st.GetCode())
	}
	if m.GetRateLimitedAsResourceExhausted() {
		c.grpcStatus = 8 // RESOURCE_EXHAUSTED, instead of the UNAVAILABLE of a 429
	}
	var err error
	if c.headers, err = responseHeaders(m.GetResponseHeadersToAdd()); err != nil {
		return nil, err
	}
	if c.enabled, err = runtimeFraction(m.GetFilterEnabled()); err != nil {
		return nil, fmt.Errorf("filter_enabled: %w", err)
	}
	if c.enforced, err = runtimeFraction(m.GetFilterEnforced()); err != nil {
		return nil, fmt.Errorf("filter_enforced: %w", err)
	}
	return c, nil
}

// responseHeaders converts the headers of a limited request's answer; the
// proxy knows no %...% operator there, only a literal value ("%%" is "%").
func responseHeaders(in []*corev3.HeaderValueOption) ([]filter.HeaderValue, error) {
	out := make([]filter.HeaderValue, 0, len(in))
	for i, h := range in {
		v := h.GetHeader().GetValue()
		if strings.Contains(strings.ReplaceAll(v, "%%", ""), "%") {
			return nil, fmt.Errorf("response_headers_to_add[%d]: %q: only literal values are supported (%%%% for %%)", i, v)
		}
		if len(h.GetHeader().GetRawValue()) > 0 {
			return nil, fmt.Errorf("response_headers_to_add[%d].header.raw_value is not supported", i)
		}
		overwrite := h.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD ||
			(h.GetAppend() != nil && !h.GetAppend().GetValue())
		if h.GetAppendAction() == corev3.HeaderValueOption_ADD_IF_ABSENT || h.GetAppendAction() == corev3.HeaderValueOption_OVERWRITE_IF_EXISTS {
			return nil, fmt.Errorf("response_headers_to_add[%d].append_action %s is not supported", i, h.GetAppendAction())
		}
		out = append(out, filter.HeaderValue{Name: h.GetHeader().GetKey(), Value: strings.ReplaceAll(v, "%%", "%"), Overwrite: overwrite})
	}
	return out, nil
}

// fraction is the share of requests a runtime fractional percent selects;
// the proxy has no runtime, so its default value holds. Unset, Envoy's
// filter_enabled and filter_enforced select no request.
type fraction float64

func runtimeFraction(p *corev3.RuntimeFractionalPercent) (fraction, error) {
	d := p.GetDefaultValue()
	if d == nil {
		return 0, nil
	}
	var den float64
	switch d.GetDenominator() {
	case typev3.FractionalPercent_HUNDRED:
		den = 100
	case typev3.FractionalPercent_TEN_THOUSAND:
		den = 10_000
	case typev3.FractionalPercent_MILLION:
		den = 1_000_000
	default:
		return 0, fmt.Errorf("denominator %s is not supported", d.GetDenominator())
	}
	return fraction(min(float64(d.GetNumerator())/den, 1)), nil
}

func (f fraction) sample() bool {
	switch {
	case f >= 1:
		return true
	case f <= 0:
		return false
	}
	return rand.Float64() < float64(f)
}

// bucketSpec is a token bucket's shape.
type bucketSpec struct {
	max, perFill uint32
	interval     time.Duration
}

// bucket is Envoy's token bucket: it starts full, and every interval since
// it was made adds perFill tokens, up to max.
type bucket struct {
	spec bucketSpec
	mu   sync.Mutex
	// tokens is the count at the fill due at last.
	tokens uint32
	last   time.Time
}

func newBucket(spec bucketSpec, now time.Time) *bucket {
	return &bucket{spec: spec, tokens: spec.max, last: now}
}

// take takes a token; false when there was none.
func (b *bucket) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if b.tokens == 0 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) full(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	return b.tokens >= b.spec.max
}

// refill adds the fills due since the last one.
func (b *bucket) refill(now time.Time) {
	n := now.Sub(b.last) / b.spec.interval
	if n <= 0 {
		return
	}
	b.tokens = uint32(min(uint64(b.spec.max), uint64(b.tokens)+uint64(n)*uint64(b.spec.perFill)))
	b.last = b.last.Add(n * b.spec.interval)
}
