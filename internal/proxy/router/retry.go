package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// retryOn is the set of retry_on conditions.
type retryOn uint16

const (
	RetryOn5xx retryOn = 1 << iota
	RetryOnGatewayError
	RetryOnReset
	RetryOnConnectFailure
	RetryOnRetriableStatusCodes
	retryOnRetriable4xx
	// retryOnRefusedStream is accepted and never fires: only an HTTP/2
	// upstream refuses streams, and upstreams are spoken to in HTTP/1.1.
	retryOnRefusedStream
	// The gRPC conditions look at a grpc-status in the response headers (a
	// trailers-only response), as Envoy's: a status in trailers never
	// triggers a retry.
	retryOnGRPCCancelled
	retryOnGRPCDeadlineExceeded
	retryOnGRPCInternal
	retryOnGRPCResourceExhausted
	retryOnGRPCUnavailable
)

var retryOnNames = map[string]retryOn{
	"5xx":                    RetryOn5xx,
	"gateway-error":          RetryOnGatewayError,
	"reset":                  RetryOnReset,
	"connect-failure":        RetryOnConnectFailure,
	"retriable-status-codes": RetryOnRetriableStatusCodes,
	"retriable-4xx":          retryOnRetriable4xx,
	"refused-stream":         retryOnRefusedStream,
	"cancelled":              retryOnGRPCCancelled,
	"deadline-exceeded":      retryOnGRPCDeadlineExceeded,
	"internal":               retryOnGRPCInternal,
	"resource-exhausted":     retryOnGRPCResourceExhausted,
	"unavailable":            retryOnGRPCUnavailable,
}

// grpcRetryOn maps the gRPC status codes retry_on can name to their condition.
var grpcRetryOn = map[string]retryOn{
	"1":  retryOnGRPCCancelled,         // CANCELLED
	"4":  retryOnGRPCDeadlineExceeded,  // DEADLINE_EXCEEDED
	"8":  retryOnGRPCResourceExhausted, // RESOURCE_EXHAUSTED
	"13": retryOnGRPCInternal,          // INTERNAL
	"14": retryOnGRPCUnavailable,       // UNAVAILABLE
}

const retryOnGRPC = retryOnGRPCCancelled | retryOnGRPCDeadlineExceeded | retryOnGRPCInternal |
	retryOnGRPCResourceExhausted | retryOnGRPCUnavailable

const (
	// Envoy's retry back-off defaults: base 25ms, maximum 10 times the base.
	defaultRetryBackOffBase = 25 * time.Millisecond
	retryBackOffMaxFactor   = 10
)

// RetryPolicy is a validated RouteAction.retry_policy. A route without one
// makes a single attempt.
type RetryPolicy struct {
	On            retryOn
	StatusCodes   []int // retriable_status_codes, for retriable-status-codes
	NumRetries    int
	PerTryTimeout time.Duration // 0: attempts are bounded by the route timeout only
	BackOffBase   time.Duration
	BackOffMax    time.Duration
}

// noRetries is the policy of routes without a retry_policy.
var noRetries = &RetryPolicy{}

func convertRetryPolicy(rp *routev3.RetryPolicy) (*RetryPolicy, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("per_try_idle_timeout", rp.GetPerTryIdleTimeout() != nil),
		xdsconv.Set("retry_priority", rp.GetRetryPriority() != nil),
		xdsconv.Set("retry_host_predicate", len(rp.GetRetryHostPredicate()) > 0),
		xdsconv.Set("retry_options_predicates", len(rp.GetRetryOptionsPredicates()) > 0),
		xdsconv.Set("host_selection_retry_max_attempts", rp.GetHostSelectionRetryMaxAttempts() != 0),
		xdsconv.Set("rate_limited_retry_back_off", rp.GetRateLimitedRetryBackOff() != nil),
		xdsconv.Set("retriable_headers", len(rp.GetRetriableHeaders()) > 0),
		xdsconv.Set("retriable_request_headers", len(rp.GetRetriableRequestHeaders()) > 0),
		xdsconv.Set("refresh_cluster_on_retry", rp.GetRefreshClusterOnRetry()),
	); err != nil {
		return nil, err
	}
	p := &RetryPolicy{NumRetries: 1, BackOffBase: defaultRetryBackOffBase}
	for _, tok := range strings.Split(rp.GetRetryOn(), ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		on, ok := retryOnNames[tok]
		if !ok {
			return nil, fmt.Errorf("retry_on %q is not supported (5xx, gateway-error, reset, connect-failure, retriable-4xx, "+
				"refused-stream, retriable-status-codes, cancelled, deadline-exceeded, internal, resource-exhausted, unavailable)", tok)
		}
		p.On |= on
	}
	for _, c := range rp.GetRetriableStatusCodes() {
		p.StatusCodes = append(p.StatusCodes, int(c))
	}
	if n := rp.GetNumRetries(); n != nil {
		p.NumRetries = int(n.GetValue())
	}
	if d := rp.GetPerTryTimeout(); d != nil {
		p.PerTryTimeout = d.AsDuration()
	}
	if err := p.setBackOff(rp.GetRetryBackOff()); err != nil {
		return nil, fmt.Errorf("retry_back_off: %w", err)
	}
	return p, nil
}

func (p *RetryPolicy) setBackOff(bo *routev3.RetryPolicy_RetryBackOff) error {
	if bo != nil {
		// Envoy rounds intervals below 1ms up to 1ms.
		p.BackOffBase = max(bo.GetBaseInterval().AsDuration(), time.Millisecond)
	}
	p.BackOffMax = retryBackOffMaxFactor * p.BackOffBase
	if m := bo.GetMaxInterval(); m != nil {
		p.BackOffMax = max(m.AsDuration(), time.Millisecond)
		if p.BackOffMax < p.BackOffBase {
			return errors.New("max_interval is below base_interval")
		}
	}
	return nil
}

// BackOff returns the wait before retry number n (1 for the first retry):
// Envoy's fully jittered exponential back-off, uniform in
// [0, (2^n - 1) * base), where the range stops growing once it exceeds the
// maximum, and the result is capped at the maximum.
func (p *RetryPolicy) BackOff(n int) time.Duration {
	span := p.BackOffBase
	for k := 1; k < n && span <= p.BackOffMax; k++ {
		span = 2*span + p.BackOffBase
	}
	return min(time.Duration(rand.Int64N(int64(span))), p.BackOffMax)
}

// Retriable reports whether retry_on allows retrying an attempt. Envoy
// treats a per-try timeout like a reset, and 5xx and gateway-error cover
// resets and connect failures as well as responses.
func (p *RetryPolicy) Retriable(o upstream.Outcome, status int) bool {
	switch o {
	case upstream.OutcomeResponse:
		return p.On&RetryOn5xx != 0 && status >= 500 ||
			p.On&RetryOnGatewayError != 0 && (status == 502 || status == 503 || status == 504) ||
			p.On&retryOnRetriable4xx != 0 && status == http.StatusConflict ||
			p.On&RetryOnRetriableStatusCodes != 0 && slices.Contains(p.StatusCodes, status)
	case upstream.OutcomeConnectFailure:
		return p.On&(RetryOn5xx|RetryOnGatewayError|RetryOnReset|RetryOnConnectFailure) != 0
	case upstream.OutcomeReset, upstream.OutcomePerTryTimeout:
		return p.On&(RetryOn5xx|RetryOnGatewayError|RetryOnReset) != 0
	}
	return false
}

// RetriableGRPC reports whether retry_on allows retrying a response for the
// grpc-status in its headers.
func (p *RetryPolicy) RetriableGRPC(res *http.Response) bool {
	if p.On&retryOnGRPC == 0 || res == nil {
		return false
	}
	vs := res.Header["Grpc-Status"]
	return len(vs) > 0 && p.On&grpcRetryOn[strings.TrimSpace(vs[0])] != 0
}
