package upstream

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// circuit_breakers: Envoy's defaults for what is unset, the DEFAULT thresholds only,
// per host only max_connections; what the proxy cannot honour is refused.
func TestConvertCircuitBreakers(t *testing.T) {
	u := wrapperspb.UInt32
	got, err := convertCircuitBreakers(&clusterv3.CircuitBreakers{
		Thresholds: []*clusterv3.CircuitBreakers_Thresholds{
			{MaxRequests: u(5), TrackRemaining: true},
			{Priority: corev3.RoutingPriority_HIGH, MaxRequests: u(1), MaxConnections: u(1)},
		},
		PerHostThresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: u(2)}},
	})
	want := DefaultBreakers()
	want.MaxRequests, want.PerHostMaxConnections = 5, 2
	if err != nil || got != want {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	if got, _ := convertCircuitBreakers(nil); got != DefaultBreakers() {
		t.Errorf("no circuit_breakers: %+v, want Envoy's defaults", got)
	}
	_, err = convertCircuitBreakers(&clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{RetryBudget: &clusterv3.CircuitBreakers_Thresholds_RetryBudget{}}}})
	if err == nil {
		t.Error("retry_budget accepted")
	}
}

// Admit: over max_connections a request waits (and overflows past
// max_pending_requests), unless its endpoint has no connection; over max_requests it
// overflows; HTTP/2 clusters never wait.
func TestAdmit(t *testing.T) {
	newCluster := func(b BreakerSpec, endpoints int, http2 bool) *Cluster {
		c := &Cluster{State: NewClusterState(), Breakers: b, HTTP2: http2, Stats: NewSeries(NewMetrics(nil, nil)).StatsFor(upstreamKey{service: "s"})}
		for range endpoints {
			c.Active = append(c.Active, new(atomic.Int64))
		}
		return c
	}
	admit := func(c *Cluster, i int) error {
		err := c.Admit(context.Background(), i)
		if err == nil {
			c.Active[i].Add(1) // the attempt's request on the endpoint (newAttempt)
		}
		return err
	}
	b := DefaultBreakers()
	b.MaxConnections, b.MaxPendingRequests = 1, 0
	c := newCluster(b, 2, false)
	if err := admit(c, 0); err != nil {
		t.Fatal(err)
	}
	if err := admit(c, 1); err != nil {
		t.Errorf("an endpoint without a connection: %v, want one (Envoy opens one for an empty pool)", err)
	}
	if err := admit(c, 0); !errors.Is(err, errPendingOverflow) {
		t.Errorf("over max_connections with max_pending_requests 0: %v, want the pending overflow", err)
	}

	b = DefaultBreakers()
	b.MaxRequests = 1
	c = newCluster(b, 1, true)
	if err := admit(c, 0); err != nil {
		t.Fatal(err)
	}
	if err := admit(c, 0); !errors.Is(err, errRequestsOverflow) {
		t.Errorf("over max_requests: %v, want the requests overflow", err)
	}
	c.Leave()
	c.Active[0].Add(-1)
	if err := admit(c, 0); err != nil {
		t.Errorf("after one left: %v", err)
	}

	// A waiting request goes when a connection is released, or gives up with its context.
	b = DefaultBreakers()
	b.MaxConnections = 1
	c = newCluster(b, 1, false)
	if err := admit(c, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Admit(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiting request whose context ends: %v, want context.Canceled", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Admit(context.Background(), 0) }()
	for c.State.breakers.pending.Load() == 0 {
		runtime.Gosched() // until it waits as pending (the counter says so, no clock)
	}
	c.Active[0].Add(-1)
	c.Leave()
	if err := <-done; err != nil {
		t.Errorf("a pending request after a release: %v", err)
	}
}
