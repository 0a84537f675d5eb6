package upstream

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Consistent hashing, built the way Envoy builds it (same key strings, same
// xxHash64), so that a request hash maps to the same endpoint as in Envoy
// given the same endpoints in the same order.

// hashTable maps a request hash to a position in the host list it was built from.
type hashTable interface {
	lookup(hash uint64) int
}

// hashRing is Envoy's RING_HASH (ketama): every host owns points on a 64-bit
// ring, and a hash belongs to the first point at or after it. Removing a
// host only moves the hashes that pointed at its own points.
type hashRing struct {
	points []ringPoint // sorted by hash
}

type ringPoint struct {
	hash uint64
	host int
}

func newHashRing(hosts []string, minRingSize uint64) *hashRing {
	r := &hashRing{}
	n := len(hosts)
	if n == 0 {
		return r
	}
	// With equal weights Envoy gives every host ceil(min/n) points, capped
	// by the maximum ring size.
	scale := math.Min(math.Ceil(float64(minRingSize)/float64(n))*float64(n), defaultMaxRingSize)
	r.points = make([]ringPoint, 0, int(scale)+n)
	perHost := scale / float64(n)
	var current, target float64
	for i, host := range hosts {
		target += perHost
		prefix := host + "_"
		for j := 0; current < target; j++ {
			r.points = append(r.points, ringPoint{hash: XXHash64String(prefix + strconv.Itoa(j)), host: i})
			current++
		}
	}
	slices.SortFunc(r.points, func(a, b ringPoint) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return a.host - b.host
	})
	return r
}

func (r *hashRing) lookup(hash uint64) int {
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].hash >= hash })
	if i == len(r.points) {
		i = 0 // past the last point: wrap around
	}
	return r.points[i].host
}

// maglevTable is Envoy's MAGLEV: a lookup table (of prime size) filled by
// the hosts' permutations in turn. Removing a host moves its share and
// only a small fraction of the others'.
type maglevTable struct {
	slots []int32
}

func newMaglevTable(hosts []string, size uint64) *maglevTable {
	t := &maglevTable{slots: make([]int32, size)}
	n := len(hosts)
	if n == 0 {
		return t
	}
	for i := range t.slots {
		t.slots[i] = -1
	}
	// Envoy fills the table in the order of the sorted host keys, so that
	// the table does not depend on the order endpoints are listed in.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(hosts[a], hosts[b]) })
	offset := make([]uint64, n)
	skip := make([]uint64, n)
	next := make([]uint64, n)
	for i, h := range order {
		offset[i] = XXHash64([]byte(hosts[h]), 0) % size
		skip[i] = XXHash64([]byte(hosts[h]), 1)%(size-1) + 1
	}
	for filled := uint64(0); filled < size; {
		for i := 0; i < n && filled < size; i++ {
			c := (offset[i] + skip[i]*next[i]) % size
			for t.slots[c] >= 0 {
				next[i]++
				c = (offset[i] + skip[i]*next[i]) % size
			}
			t.slots[c] = int32(order[i])
			next[i]++
			filled++
		}
	}
	return t
}

func (t *maglevTable) lookup(hash uint64) int {
	return int(t.slots[hash%uint64(len(t.slots))])
}
