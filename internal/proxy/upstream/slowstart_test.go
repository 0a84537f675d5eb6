package upstream

import (
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
// gets about a tenth of the share of an endpoint that was there from the start.
// Endpoints of the cluster's first configuration are not in slow start.
func TestSlowStartPick(t *testing.T) {
	cs := NewClusterState()
	if added := cs.AddedTimes([]string{"a:1"}, time.Now()); !added[0].IsZero() {
		t.Fatal("an endpoint of the first configuration is in slow start")
	}
	added := cs.AddedTimes([]string{"a:1", "b:1"}, time.Now())
	if !added[0].IsZero() || added[1].IsZero() {
		t.Fatalf("added = %v", added)
	}
	c := &Cluster{Endpoints: []string{"a:1", "b:1"}, State: cs, Added: added,
		LB:     lbSpec{policy: lbRoundRobin, SlowStart: &SlowStartSpec{window: time.Hour, aggression: 1, minWeight: 0.1}},
		Active: []*atomic.Int64{new(atomic.Int64), new(atomic.Int64)}}
	c.AllHosts = &HostSet{Idx: []int{0, 1}}
	picks := [2]int{}
	for range 4000 {
		i, ok := c.Pick(PickContext{})
		if !ok {
			t.Fatal("no pick")
		}
		picks[i]++
	}
	if share := float64(picks[1]) / 4000; share < 0.03 || share > 0.2 {
		t.Errorf("the new endpoint got %.1f%% of the picks, want about 9%% (%v)", 100*share, picks)
	}
}
