package upstream

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// panicCluster is a cluster of four endpoints converted from an xDS cluster with
// lb_policy policy and, unless threshold is nil, that healthy_panic_threshold. Active
// health checking passes the endpoints of passing (nil: no active health checking);
// outlier detection ejects those of ejected (nil: no outlier detection).
func panicCluster(t *testing.T, policy clusterv3.Cluster_LbPolicy, threshold *float64, passing, ejected []int) *Cluster {
	t.Helper()
	xc := &clusterv3.Cluster{Name: "unit", LbPolicy: policy}
	if threshold != nil {
		xc.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: *threshold}}
	}
	spec, err := convertLB(xc)
	if err != nil {
		t.Fatal(err)
	}
	hosts := testHosts(4)
	c := unitCluster(spec, hosts)
	if passing != nil {
		c.Health = &HealthState{endpoints: map[string]*endpointHealth{}}
		for _, h := range hosts {
			c.Health.endpoints[h] = &endpointHealth{}
		}
		for _, i := range passing {
			c.Health.endpoints[hosts[i]].Healthy.Store(true)
		}
	}
	if ejected != nil {
		c.Outlier = &outlierState{}
		c.OutlierHosts = make([]*outlierHost, len(hosts))
		for i, h := range hosts {
			c.OutlierHosts[i] = &outlierHost{endpoint: h}
		}
		for _, i := range ejected {
			c.OutlierHosts[i].Ejected.Store(true)
		}
	}
	return c
}

// picked returns the endpoints that 2000 picks chose, in order; empty when a pick
// failed (the router's 503 "no healthy upstream").
func picked(t *testing.T, c *Cluster) []int {
	t.Helper()
	seen := map[int]bool{}
	for i := range 2000 {
		// Hash policies: a different hash per request spreads picks over the ring.
		ep, ok := c.Pick(PickContext{Hash: uint64(i) * 0x9E3779B97F4A7C15, HasHash: true})
		if !ok {
			if len(seen) > 0 {
				t.Fatalf("a pick failed after picks succeeded: %v", seen)
			}
			return []int{}
		}
		seen[ep] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// TestPanicThresholdEveryPolicy holds every load balancing policy to Envoy's panic
// mode: when the share of healthy endpoints (passing their active health check and
// not ejected by outlier detection) is below healthy_panic_threshold (default 50%,
// rounded to a whole percent), picks spread over every endpoint, unhealthy ones
// included; threshold 0 never panics, so with no healthy endpoint a pick fails and
// the client gets 503 "no healthy upstream".
func TestPanicThresholdEveryPolicy(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	all := []int{0, 1, 2, 3}
	tests := []struct {
		name             string
		threshold        *float64
		passing, ejected []int
		want             []int
	}{
		{"default 50: all healthy", nil, all, nil, all},
		{"default 50: half healthy is not below it", nil, []int{1, 3}, nil, []int{1, 3}},
		{"default 50: a quarter healthy panics", nil, []int{2}, nil, all},
		{"default 50: none healthy panics", nil, []int{}, nil, all},
		{"0: a quarter healthy, no panic", f(0), []int{2}, nil, []int{2}},
		{"0: none healthy, no endpoint", f(0), []int{}, nil, []int{}},
		{"custom 30: a quarter healthy panics", f(30), []int{0}, nil, all},
		{"custom 30: half healthy does not", f(30), []int{0, 3}, nil, []int{0, 3}},
		{"custom 74.6 rounds to 75: three quarters healthy is not below it", f(74.6), []int{0, 1, 2}, nil, []int{0, 1, 2}},
		{"custom 75.5 rounds to 76: three quarters healthy panics", f(75.5), []int{0, 1, 2}, nil, all},
		{"100: one unhealthy endpoint panics", f(100), []int{0, 1, 2}, nil, all},
		// Outlier detection: an ejected endpoint is unhealthy, and panic mode
		// sends traffic to it again.
		{"default 50, no health check: three ejected panics", nil, nil, []int{0, 1, 2}, all},
		{"default 50, no health check: one ejected", nil, nil, []int{1}, []int{0, 2, 3}},
		{"0, no health check: three ejected", f(0), nil, []int{0, 1, 2}, []int{3}},
		{"0: one passing, ejected: none", f(0), []int{3}, []int{3}, []int{}},
		{"0: passing and not ejected", f(0), []int{0, 1, 3}, []int{1}, []int{0, 3}},
		{"default 50: passing and not ejected is a quarter: panics", nil, []int{0, 1, 3}, []int{1, 3}, all},
	}
	policies := []clusterv3.Cluster_LbPolicy{clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_LEAST_REQUEST, clusterv3.Cluster_RANDOM, clusterv3.Cluster_RING_HASH, clusterv3.Cluster_MAGLEV}
	for _, policy := range policies {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%v/%s", policy, tc.name), func(t *testing.T) {
				c := panicCluster(t, policy, tc.threshold, tc.passing, tc.ejected)
				if got := picked(t, c); !slices.Equal(got, tc.want) {
					t.Errorf("picks reached endpoints %v, want %v", got, tc.want)
				}
			})
		}
	}
}
