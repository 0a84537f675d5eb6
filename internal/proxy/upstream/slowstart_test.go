package upstream

import (
	"log/slog"
	"math"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Envoy's weight factor: max(min weight, (time in the cluster / window)^(1/aggression)).
func TestSlowStartFactor(t *testing.T) {
	s := &SlowStartSpec{window: 100 * time.Second, aggression: 2, minWeight: 0.1}
	now := time.Now()
	for _, tc := range []struct {
		added time.Time
		want  float64
	}{
		{time.Time{}, 1},                        // there from the start
		{now.Add(-200 * time.Second), 1},        // past the window
		{now.Add(-25 * time.Second), 0.5},       // (25/100)^(1/2)
		{now.Add(-500 * time.Millisecond), 0.1}, // below the minimum weight
	} {
		if got := s.factor(tc.added, now); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("added %v ago: factor %v, want %v", now.Sub(tc.added), got, tc.want)
		}
	}
	if _, err := convertSlowStart(&clusterv3.Cluster_SlowStartConfig{}); err == nil {
		t.Error("a slow start without a window was accepted")
	}
	if _, err := convertSlowStart(&clusterv3.Cluster_SlowStartConfig{SlowStartWindow: durationpb.New(time.Second), Aggression: &corev3.RuntimeDouble{DefaultValue: -1}}); err == nil {
		t.Error("a negative aggression was accepted")
	}
	got, err := convertSlowStart(&clusterv3.Cluster_SlowStartConfig{SlowStartWindow: durationpb.New(time.Minute), MinWeightPercent: &typev3.Percent{Value: 25}})
	if err != nil || got.window != time.Minute || got.aggression != 1 || got.minWeight != 0.25 {
		t.Errorf("convertSlowStart = %+v, %v", got, err)
	}
}

// An endpoint added to a cluster takes its round-robin turns with the probability of
// its factor: just added, with a window of an hour and a minimum weight of 10%, it
// gets about a tenth of the share of an endpoint past its window. As in Envoy, the
// endpoints of the cluster's first configuration are in slow start too.
func TestSlowStartPick(t *testing.T) {
	cs := NewClusterState()
	start := time.Now().Add(-2 * time.Hour)
	if added := cs.AddedTimes([]string{"a:1"}, start); !added[0].Equal(start) {
		t.Fatalf("an endpoint of the first configuration joined at %v, want %v", added[0], start)
	}
	added := cs.AddedTimes([]string{"a:1", "b:1"}, time.Now())
	if !added[0].Equal(start) || !added[1].After(start) {
		t.Fatalf("added = %v", added)
	}
	c := &Cluster{Endpoints: []string{"a:1", "b:1"}, State: cs, Added: added,
		LB:     lbSpec{policy: lbRoundRobin, SlowStart: &SlowStartSpec{window: time.Hour, aggression: 1, minWeight: 0.1}},
		Active: []*atomic.Int64{new(atomic.Int64), new(atomic.Int64)}}
	c.AllHosts = &HostSet{Idx: []int{0, 1}}
	if share := secondShare(t, c); share < 0.03 || share > 0.2 {
		t.Errorf("the new endpoint got %.1f%% of the picks, want about 9%%", 100*share)
	}
}

// secondShare is the part of 4000 picks of a two-endpoint cluster that go to the
// second endpoint.
func secondShare(t *testing.T, c *Cluster) float64 {
	t.Helper()
	picks := [2]int{}
	for range 4000 {
		i, ok := c.Pick(PickContext{})
		if !ok {
			t.Fatal("no pick")
		}
		picks[i]++
	}
	return float64(picks[1]) / 4000
}

// An endpoint that fails its active health check and passes it again restarts its
// slow start window, as Envoy's last health check pass time does; one healthy from
// its first check started its window then (here two hours ago: past it).
func TestSlowStartRestartsOnRecovery(t *testing.T) {
	spec := &HealthCheckSpec{UnhealthyThreshold: 1, HealthyThreshold: 1}
	ok, fail := CheckResult{OK: true, Reason: "status 200"}, CheckResult{Immediate: true, Reason: "status 503"}
	cs := NewClusterState()
	eps := []string{"a:1", "b:1"}
	hs := &HealthState{cluster: "c", log: slog.New(slog.DiscardHandler), endpoints: map[string]*endpointHealth{}}
	counters := map[string]*checkCounters{}
	long := time.Now().Add(-2 * time.Hour)
	for _, ep := range eps {
		hs.endpoints[ep] = &endpointHealth{}
		counters[ep] = &checkCounters{fresh: true}
		hs.Record(ep, hs.endpoints[ep], counters[ep], ok, spec)
		if hs.passedAt(ep).IsZero() {
			t.Fatalf("%s passed its first check, yet has no pass time", ep)
		}
		hs.endpoints[ep].passed.Store(long.UnixNano())
	}
	c := &Cluster{Endpoints: eps, State: cs, Added: cs.AddedTimes(eps, long), Health: hs,
		LB:     lbSpec{policy: lbRoundRobin, SlowStart: &SlowStartSpec{window: time.Hour, aggression: 1, minWeight: 0.1}},
		Active: []*atomic.Int64{new(atomic.Int64), new(atomic.Int64)}}
	share := func() float64 { return secondShare(t, c) }
	if s := share(); s < 0.4 || s > 0.6 {
		t.Fatalf("both past their window, b got %.1f%% of the picks, want half", 100*s)
	}
	b := hs.endpoints["b:1"]
	hs.Record("b:1", b, counters["b:1"], fail, spec)
	if s := share(); s != 0 {
		t.Fatalf("failing its check, b got %.1f%% of the picks", 100*s)
	}
	hs.Record("b:1", b, counters["b:1"], ok, spec)
	if s := share(); s < 0.03 || s > 0.2 {
		t.Errorf("recovered, b got %.1f%% of the picks, want about 9%% (its minimum weight)", 100*s)
	}
}

// An endpoint that EDS marks unhealthy and then healthy again keeps its join time
// (Envoy keeps the host), while one that leaves the assignment starts again.
func TestSlowStartEDSHealth(t *testing.T) {
	cs := NewClusterState()
	long := time.Now().Add(-2 * time.Hour)
	cs.AddedTimes([]string{"a:1", "b:1"}, long)
	cs.PruneActive([]string{"a:1"}, []string{"b:1"}) // b: health_status UNHEALTHY
	cs.PruneActive([]string{}, []string{"b:1"})      // a: gone
	added := cs.AddedTimes([]string{"a:1", "b:1"}, time.Now())
	if !added[1].Equal(long) {
		t.Errorf("b, healthy again, joined at %v: its window restarted", added[1])
	}
	if !added[0].After(long) {
		t.Errorf("a, back after leaving, kept its old join time")
	}
}
