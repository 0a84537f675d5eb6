package upstream

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// SlowStartSpec is a cluster's slow_start_config: an endpoint added to a cluster
// that already had some, or one passing its active health check again after
// failing it, gets a share of the traffic growing over Window, as Envoy scales
// its weight: max(MinWeight, (time since then / Window)^(1/Aggression)).
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
// ones. As in Envoy, which starts an endpoint's window when its load balancer
// first sees it healthy, the endpoints of the cluster's first configuration
// ramp up too (together, so their shares stay even). ADS goroutine only, like
// ActiveCounters.
func (cs *ClusterState) AddedTimes(endpoints []string, now time.Time) []time.Time {
	if cs.added == nil {
		cs.added = make(map[string]time.Time, len(endpoints))
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
// starts slowly again. Those still listed but marked unhealthy by EDS (held)
// keep their time: Envoy keeps such a host, so turning healthy again does not
// restart its window.
func (cs *ClusterState) pruneAdded(keep map[string]bool, held []string) {
	for ep := range cs.added {
		if !keep[ep] && !slices.Contains(held, ep) {
			delete(cs.added, ep)
		}
	}
}

// pickSlowly is round robin where an endpoint in slow start takes its turn with
// the probability of its weight factor, so its share grows with time.
func (c *Cluster) pickSlowly(hs *HostSet) int {
	now, since := time.Now(), hs.sinceOr(c.Added)
	idx := hs.Idx
	n := uint64(len(idx))
	for range idx {
		i := idx[(c.State.rr.Add(1)-1)%n]
		if f := c.LB.SlowStart.factor(since[i], now); f >= 1 || rand.Float64() < f {
			return i
		}
	}
	return idx[(c.State.rr.Add(1)-1)%n] // every endpoint declined: take the next anyway
}

// slowStartSince returns when each endpoint's slow start window began, for a
// host set being built: when it joined the cluster, or when its active health
// check last made it healthy (its first pass, or passing again after failing),
// whichever is later: Envoy's last health check pass time. Nil without slow
// start or health checks: Added is all there is.
func (c *Cluster) slowStartSince() []time.Time {
	if c.LB.SlowStart == nil || c.Added == nil || c.Health == nil {
		return nil
	}
	since := make([]time.Time, len(c.Endpoints))
	for i, ep := range c.Endpoints {
		since[i] = c.Added[i]
		if p := c.Health.passedAt(ep); p.After(since[i]) {
			since[i] = p
		}
	}
	return since
}

// sinceOr is the host set's slow start times, or added when it has none.
func (hs *HostSet) sinceOr(added []time.Time) []time.Time {
	if hs.since != nil {
		return hs.since
	}
	return added
}
