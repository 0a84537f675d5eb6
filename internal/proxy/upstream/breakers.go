package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// Envoy's circuit breaker defaults, which hold for every cluster, whether it
// configures circuit_breakers or not; per-host connections are unlimited.
const (
	defaultMaxConnections     = 1024
	defaultMaxPendingRequests = 1024
	defaultMaxRequests        = 1024
	defaultMaxRetries         = 3
	unlimited                 = 1<<63 - 1
)

// BreakerSpec are a cluster's circuit breakers at DEFAULT priority, the only
// priority routes of Portico's translator (and Contour's) ever use.
type BreakerSpec struct {
	MaxConnections, MaxPendingRequests, MaxRequests, MaxRetries int64
	PerHostMaxConnections                                       int64
}

// DefaultBreakers are Envoy's, for a cluster without circuit_breakers.
func DefaultBreakers() BreakerSpec {
	return BreakerSpec{MaxConnections: defaultMaxConnections, MaxPendingRequests: defaultMaxPendingRequests,
		MaxRequests: defaultMaxRequests, MaxRetries: defaultMaxRetries, PerHostMaxConnections: unlimited}
}

// convertCircuitBreakers reads circuit_breakers: the last DEFAULT threshold
// wins, as when Envoy reads them in order; HIGH thresholds are accepted and
// unused, since no route asks for HIGH priority.
func convertCircuitBreakers(cb *clusterv3.CircuitBreakers) (BreakerSpec, error) {
	spec := DefaultBreakers()
	for i, t := range cb.GetThresholds() {
		if err := supportedThreshold(t); err != nil {
			return spec, fmt.Errorf("thresholds[%d]: %w", i, err)
		}
		if t.GetPriority() != corev3.RoutingPriority_DEFAULT {
			continue
		}
		setLimit(&spec.MaxConnections, t.GetMaxConnections().GetValue(), t.GetMaxConnections() != nil)
		setLimit(&spec.MaxPendingRequests, t.GetMaxPendingRequests().GetValue(), t.GetMaxPendingRequests() != nil)
		setLimit(&spec.MaxRequests, t.GetMaxRequests().GetValue(), t.GetMaxRequests() != nil)
		setLimit(&spec.MaxRetries, t.GetMaxRetries().GetValue(), t.GetMaxRetries() != nil)
	}
	for i, t := range cb.GetPerHostThresholds() {
		if err := supportedThreshold(t); err != nil {
			return spec, fmt.Errorf("per_host_thresholds[%d]: %w", i, err)
		}
		// Envoy reads only max_connections per host.
		if t.GetPriority() == corev3.RoutingPriority_DEFAULT && t.GetMaxConnections() != nil {
			spec.PerHostMaxConnections = int64(t.GetMaxConnections().GetValue())
		}
	}
	return spec, nil
}

// setLimit sets a threshold that is present; an absent one keeps Envoy's default.
func setLimit(limit *int64, v uint32, set bool) {
	if set {
		*limit = int64(v)
	}
}

func supportedThreshold(t *clusterv3.CircuitBreakers_Thresholds) error {
	return xdsconv.Unsupported(
		xdsconv.Set("retry_budget", t.GetRetryBudget() != nil),
		xdsconv.Set("max_connection_pools", t.GetMaxConnectionPools() != nil),
	)
}

// breakerState counts what the circuit breakers limit. It lives in the
// ClusterState, so a configuration swap neither forgets nor resets what is in
// flight, and a new limit applies at once to the next request.
type breakerState struct {
	requests atomic.Int64 // requests (attempts) in flight
	conns    atomic.Int64 // HTTP/1.1 connections carrying a request
	pending  atomic.Int64 // requests waiting for a connection
	retries  atomic.Int64 // retries in flight

	mu   sync.Mutex
	free chan struct{} // closed when a connection is released while requests wait
}

// Overflow is why a circuit breaker refused a request: Envoy answers it 503
// with x-envoy-overloaded: true and the response flag UO.
type Overflow struct{ Breaker string }

func (o *Overflow) Error() string { return "overflow: " + o.Breaker }

// IsOverflow reports whether err is a circuit breaker's refusal.
func IsOverflow(err error) bool {
	var o *Overflow
	return errors.As(err, &o)
}

// breakerNames are the breakers' names, as in the xDS thresholds, by breaker;
// the overflow series are labelled with them.
var breakerNames = [...]string{"max_connections", "max_pending_requests", "max_requests", "max_retries"}

type breaker int

const (
	breakerConnections breaker = iota
	breakerPending
	breakerRequests
	breakerRetries
)

var (
	errPendingOverflow  = &Overflow{Breaker: breakerNames[breakerPending]}
	errRequestsOverflow = &Overflow{Breaker: breakerNames[breakerRequests]}
)

// Admit lets an attempt at endpoint i through the circuit breakers, in
// Envoy's order: a connection (an HTTP/1.1 connection carries one request at
// a time; over max_connections, cluster-wide or per host, the request waits
// as pending, and over max_pending_requests it overflows), then a place
// among the requests in flight (over max_requests it overflows). An
// endpoint with no connection always gets one, as Envoy creates one for a
// host whose pool is empty whatever the limits. HTTP/2 multiplexes every
// request on one connection per endpoint, so only max_requests applies.
// Each Admit that returns nil is followed by one Leave.
func (c *Cluster) Admit(ctx context.Context, i int) error {
	b := &c.State.breakers
	if !c.HTTP2 {
		if err := c.takeConnection(ctx, i); err != nil {
			return err
		}
	}
	if b.requests.Add(1) > c.Breakers.MaxRequests {
		b.requests.Add(-1)
		c.releaseConnection()
		c.Stats.overflowed(breakerRequests)
		return errRequestsOverflow
	}
	return nil
}

// Leave ends what Admit let through.
func (c *Cluster) Leave() {
	c.State.breakers.requests.Add(-1)
	c.releaseConnection()
}

// takeConnection reserves an HTTP/1.1 connection to endpoint i, waiting as
// a pending request while the limits are reached.
func (c *Cluster) takeConnection(ctx context.Context, i int) error {
	b := &c.State.breakers
	if c.tryConnection(i) {
		return nil
	}
	c.Stats.overflowed(breakerConnections)
	if b.pending.Add(1) > c.Breakers.MaxPendingRequests {
		b.pending.Add(-1)
		c.Stats.overflowed(breakerPending)
		return errPendingOverflow
	}
	defer b.pending.Add(-1)
	for {
		free := b.freed()
		if c.tryConnection(i) {
			return nil
		}
		select {
		case <-free:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// tryConnection takes a connection to endpoint i if the limits allow it.
// Active counts the endpoint's requests in flight, which are its busy
// connections.
func (c *Cluster) tryConnection(i int) bool {
	b := &c.State.breakers
	busy := c.Active[i].Load()
	if busy > 0 && busy >= c.Breakers.PerHostMaxConnections {
		return false
	}
	if b.conns.Add(1) > c.Breakers.MaxConnections && busy > 0 {
		b.conns.Add(-1)
		return false
	}
	return true
}

func (c *Cluster) releaseConnection() {
	if c.HTTP2 {
		return
	}
	b := &c.State.breakers
	b.conns.Add(-1)
	if b.pending.Load() > 0 {
		b.wake()
	}
}

// freed returns a channel closed at the next release of a connection.
func (b *breakerState) freed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free == nil {
		b.free = make(chan struct{})
	}
	return b.free
}

func (b *breakerState) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free != nil {
		close(b.free)
		b.free = nil
	}
}

// AcquireRetry reserves a retry; false means the max_retries circuit breaker
// is open (Envoy's default allows 3 retries of a cluster in flight).
func (c *Cluster) AcquireRetry() bool {
	r := &c.State.breakers.retries
	if r.Add(1) > c.Breakers.MaxRetries {
		r.Add(-1)
		c.Stats.overflowed(breakerRetries)
		return false
	}
	return true
}

func (c *Cluster) ReleaseRetry() { c.State.breakers.retries.Add(-1) }
