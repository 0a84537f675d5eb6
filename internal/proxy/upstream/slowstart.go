package upstream

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// SlowStartSpec is a cluster's slow_start_config: an endpoint added to a cluster
// that already had some gets a share of the traffic growing over Window, as Envoy
// scales its weight: max(MinWeight, (time in the cluster / Window)^(1/Aggression)).
type SlowStartSpec struct {
	window     time.Duration
	aggression float64
	minWeight  float64 // a fraction, from min_weight_percent (default 10%)
}

func convertSlowStart(c *clusterv3.Cluster_SlowStartConfig) (*SlowStartSpec, error) {
	if c == nil {
		return nil, nil
	}
	s := &SlowStartSpec{aggression: 1, minWeight: 0.1}
	if w := c.GetSlowStartWindow(); w != nil {
		s.window = w.AsDuration()
	}
	if s.window <= 0 {
		return nil, errors.New("slow_start_config.slow_start_window must be positive")
	}
	if a := c.GetAggression(); a != nil {
		if a.GetRuntimeKey() != "" && a.GetDefaultValue() == 0 {
			return nil, errors.New("slow_start_config.aggression: a runtime key needs a default_value")
		}
		s.aggression = a.GetDefaultValue()
	}
	if s.aggression <= 0 || math.IsInf(s.aggression, 0) || math.IsNaN(s.aggression) {
		return nil, errors.New("slow_start_config.aggression must be a positive number")
	}
	if m := c.GetMinWeightPercent(); m != nil {
		s.minWeight = m.GetValue() / 100
	}
	return s, nil
}

// factor is how much of its full weight an endpoint in the cluster since added
// gets at now; 1 out of slow start (the zero added: there from the start).
func (s *SlowStartSpec) factor(added, now time.Time) float64 {
	if s == nil || added.IsZero() {
		return 1
	}
	elapsed := now.Sub(added)
	if elapsed >= s.window {
		return 1
	}
	f := math.Pow(float64(elapsed)/float64(s.window), 1/s.aggression)
	return max(f, s.minWeight)
}

// AddedTimes returns when each endpoint joined the cluster, recording the new
// ones: endpoints of the cluster's first configuration are not in slow start
// (zero time), as in Envoy, where slow start is for hosts added afterwards.
// ADS goroutine only, like ActiveCounters.
func (cs *ClusterState) AddedTimes(endpoints []string, now time.Time) []time.Time {
	if cs.added == nil {
		cs.added = make(map[string]time.Time, len(endpoints))
		for _, ep := range endpoints {
			cs.added[ep] = time.Time{}
		}
	}
	out := make([]time.Time, len(endpoints))
	for i, ep := range endpoints {
		t, ok := cs.added[ep]
		if !ok {
			t = now
			cs.added[ep] = t
		}
		out[i] = t
	}
	return out
}

// pruneAdded forgets the endpoints no longer in the cluster: one that comes back
// starts slowly again.
func (cs *ClusterState) pruneAdded(keep map[string]bool) {
	for ep := range cs.added {
		if !keep[ep] {
			delete(cs.added, ep)
		}
	}
}

// pickSlowly is round robin where an endpoint in slow start takes its turn with
// the probability of its weight factor, so its share grows with time.
func (c *Cluster) pickSlowly(idx []int) int {
	now := time.Now()
	n := uint64(len(idx))
	for range idx {
		i := idx[(c.State.rr.Add(1)-1)%n]
		if f := c.LB.SlowStart.factor(c.Added[i], now); f >= 1 || rand.Float64() < f {
			return i
		}
	}
	return idx[(c.State.rr.Add(1)-1)%n] // every endpoint declined: take the next anyway
}
