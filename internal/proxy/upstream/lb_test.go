package upstream

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestXXHash64(t *testing.T) {
	// Reference values of XXH64 (as computed by github.com/cespare/xxhash).
	for _, tc := range []struct {
		in   string
		seed uint64
		want uint64
	}{
		{"", 0, 0xef46db3751d8e999},
		{"", 1, 0xd5afba1336a3be4b},
		{"a", 0, 0xd24ec4f1a98c6e5b},
		{"abc", 0, 0x44bc2cf5ad770999},
		{"abc", 1, 0xbea9ca8199328908},
		{"10.0.0.1:80_0", 0, 0x75041381e7371a08},
		{"127.0.0.1", 0, 0xc08b1587df65b7a7},
		{strings.Repeat("x", 31), 0, 0x60dd0d01083b99f0},
		{strings.Repeat("0123456789", 7), 0, 0x4916a0f3f0e1c781},
		{strings.Repeat("y", 100), 1, 0xfab2c5c753555e39},
	} {
		if got := XXHash64([]byte(tc.in), tc.seed); got != tc.want {
			t.Errorf("xxHash64(%q, %d) = %#x, want %#x", tc.in, tc.seed, got, tc.want)
		}
	}
}

func testHosts(n int) []string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("10.0.0.%d:8080", i+1)
	}
	return hosts
}

func consistencyAfterRemoval(t *testing.T, build func(hosts []string) hashTable) (movedShare float64) {
	t.Helper()
	hosts := testHosts(5)
	const removed = 2
	remaining := slices.Delete(slices.Clone(hosts), removed, removed+1)
	before, after := build(hosts), build(remaining)
	rng := rand.New(rand.NewPCG(1, 2))
	moved, kept := 0, 0
	used := map[string]int{}
	for range 20000 {
		h := rng.Uint64()
		was, is := hosts[before.lookup(h)], remaining[after.lookup(h)]
		used[was]++
		if was == hosts[removed] {
			continue
		}
		if was == is {
			kept++
		} else {
			moved++
		}
	}
	for _, h := range hosts {
		if used[h] == 0 {
			t.Errorf("host %s got none of 20000 keys: %v", h, used)
		}
	}
	return float64(moved) / float64(moved+kept)
}

func TestHashRingIsConsistent(t *testing.T) {
	if n := len(newHashRing(testHosts(5), 1024).points); n != 1025 {
		t.Errorf("ring of 5 hosts, minimum 1024: %d points, want 1025 (ceil(1024/5) each)", n)
	}
	if n := len(newHashRing(testHosts(3), 64).points); n != 66 {
		t.Errorf("ring of 3 hosts, minimum 64: %d points, want 66", n)
	}
	// Like Envoy's, the ring gives every host ceil(minimum/n) points, so
	// after a removal the remaining hosts get more points (205 -> 256 each
	// here), and the new points can take keys of other remaining hosts: at
	// most their share of the ring. Keys never move when the host set is
	// unchanged, and the removed host's keys all move.
	moved := consistencyAfterRemoval(t, func(hosts []string) hashTable { return newHashRing(hosts, 1024) })
	newPoints := float64(4*(256-205)) / float64(4*256)
	if moved > newPoints {
		t.Errorf("removing one host moved %.2f%% of the other hosts' keys, want at most the new points' %.2f%%", 100*moved, 100*newPoints)
	}
	t.Logf("ring hash: %.2f%% of the remaining hosts' keys moved (new points: %.2f%% of the ring)", 100*moved, 100*newPoints)
	// With as many points per host before and after (one each here), only
	// the removed host's keys move.
	if moved := consistencyAfterRemoval(t, func(hosts []string) hashTable { return newHashRing(hosts, 1) }); moved != 0 {
		t.Errorf("one point per host: removing a host moved %.2f%% of the other hosts' keys, want none", 100*moved)
	}
}

func TestMaglevIsConsistent(t *testing.T) {
	m := newMaglevTable(testHosts(5), defaultMaglevSize)
	counts := make([]int, 5)
	for _, s := range m.slots {
		counts[s]++
	}
	for i, c := range counts {
		// Maglev fills the table in turns: shares differ by at most one slot.
		if c != defaultMaglevSize/5 && c != defaultMaglevSize/5+1 {
			t.Errorf("host %d owns %d of %d slots", i, c, defaultMaglevSize)
		}
	}
	// Maglev's disruption is minimal, not nil: a few keys of the remaining
	// hosts may move.
	moved := consistencyAfterRemoval(t, func(hosts []string) hashTable {
		return newMaglevTable(hosts, defaultMaglevSize)
	})
	if moved > 0.02 {
		t.Errorf("removing one host moved %.2f%% of the other hosts' keys, want under 2%%", 100*moved)
	}
	t.Logf("maglev: %.3f%% of the remaining hosts' keys moved", 100*moved)
}

func unitCluster(lb lbSpec, endpoints []string) *Cluster {
	cs := NewClusterState()
	return &Cluster{
		Name: "unit", Endpoints: endpoints, LB: lb, State: cs,
		Active: cs.ActiveCounters(endpoints), AllHosts: &HostSet{Idx: AllIndexes(len(endpoints))},
	}
}

func TestLeastRequestPick(t *testing.T) {
	c := unitCluster(lbSpec{policy: lbLeastRequest, choiceCount: 64}, testHosts(3))
	c.Active[0].Store(5)
	c.Active[2].Store(3)
	// 64 samples all miss endpoint 1 with probability (2/3)^64 ~ 5e-12.
	for range 100 {
		if i, _ := c.Pick(PickContext{}); i != 1 {
			t.Fatalf("picked endpoint %d with %d active, want 1 (0 active)", i, c.Active[i].Load())
		}
	}
	// With two choices the idle endpoint wins whenever it is sampled: 5/9.
	c.LB.choiceCount = 2
	got := 0
	for range 9000 {
		if i, _ := c.Pick(PickContext{}); i == 1 {
			got++
		}
	}
	if got < 4600 || got > 5400 {
		t.Errorf("power of two choices picked the idle endpoint %d of 9000 times, want about 5000", got)
	}
}

func TestPanicMode(t *testing.T) {
	hosts := testHosts(4)
	tests := []struct {
		name      string
		healthy   []int
		threshold float64
		want      []int
	}{
		{"all healthy", []int{0, 1, 2, 3}, 50, []int{0, 1, 2, 3}},
		{"half healthy is not below 50%", []int{1, 3}, 50, []int{1, 3}},
		{"a quarter healthy: panic, all endpoints", []int{2}, 50, []int{0, 1, 2, 3}},
		{"none healthy: panic", nil, 50, []int{0, 1, 2, 3}},
		{"panic disabled", []int{2}, 0, []int{2}},
		{"none healthy, panic disabled: nothing", nil, 0, []int{}},
		{"threshold 100: any unhealthy endpoint panics", []int{0, 1, 2}, 100, []int{0, 1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := unitCluster(lbSpec{policy: lbRoundRobin, panicThreshold: tc.threshold}, hosts)
			c.Health = &HealthState{endpoints: map[string]*endpointHealth{}}
			for _, h := range hosts {
				c.Health.endpoints[h] = &endpointHealth{}
			}
			for _, i := range tc.healthy {
				c.Health.endpoints[hosts[i]].Healthy.Store(true)
			}
			if got := c.currentHosts().Idx; !slices.Equal(got, tc.want) {
				t.Errorf("host set %v, want %v", got, tc.want)
			}
			if _, ok := c.Pick(PickContext{}); ok != (len(tc.want) > 0) {
				t.Errorf("pick ok = %v with host set %v", ok, tc.want)
			}
		})
	}
}
