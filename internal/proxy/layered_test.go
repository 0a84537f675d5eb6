package proxy

import (
	"fmt"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"
)

// flat is m as a plain map, for comparisons.
func (m *layered[K, V]) flat() map[K]V {
	out := make(map[K]V, m.n)
	for k, v := range m.base {
		out[k] = v
	}
	for k, e := range m.overlay {
		if e.gone {
			delete(out, k)
		} else {
			out[k] = e.v
		}
	}
	return out
}

// A layered map patched generation after generation reads as a plain map
// given the same writes, and every earlier generation reads as it did when
// it was settled: patches never write through to what they share.
func TestLayeredMapPatchesLeaveEarlierGenerations(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			keys := 50 + rng.IntN(400)
			want := make(map[string]int)
			m := newLayered[string, int](0)
			for i := range keys / 2 {
				k := fmt.Sprint("k", rng.IntN(keys))
				m.set(k, i)
				want[k] = i
			}
			m.settle()
			type generation struct {
				m    layered[string, int]
				want map[string]int
			}
			var gens []generation
			folds := 0
			for step := range 200 {
				gens = append(gens, generation{m, maps.Clone(want)})
				next := m.patched()
				for range 1 + rng.IntN(12) {
					k := fmt.Sprint("k", rng.IntN(keys))
					if rng.IntN(3) == 0 {
						next.remove(k)
						delete(want, k)
					} else {
						next.set(k, step)
						want[k] = step
					}
				}
				next.settle()
				if next.overlay == nil && m.overlay != nil {
					folds++
				}
				m = next
				checkLayered(t, fmt.Sprintf("step %d", step), &m, want, keys)
				g := gens[rng.IntN(len(gens))]
				checkLayered(t, fmt.Sprintf("step %d, an earlier generation", step), &g.m, g.want, keys)
			}
			if folds == 0 {
				t.Errorf("no overlay was folded in 200 patches of %d keys", keys)
			}
		})
	}
}

func checkLayered(t *testing.T, when string, m *layered[string, int], want map[string]int, keys int) {
	t.Helper()
	if m.len() != len(want) {
		t.Fatalf("%s: len %d, want %d", when, m.len(), len(want))
	}
	for i := range keys {
		k := fmt.Sprint("k", i)
		v, ok := m.get(k)
		w, wok := want[k]
		if ok != wok || v != w {
			t.Fatalf("%s: get(%q) = %d, %t; want %d, %t", when, k, v, ok, w, wok)
		}
	}
}

// clusterNamed is the named cluster of s, nil when it has none.
func (s *snapshot) clusterNamed(name string) *upstream.Cluster {
	uc, _ := s.clusters.get(name)
	return uc
}

// shares reports whether m and o are the same maps (one shared, not a patch of the other).
func (m *layered[K, V]) shares(o *layered[K, V]) bool {
	return reflect.ValueOf(m.base).UnsafePointer() == reflect.ValueOf(o.base).UnsafePointer() &&
		reflect.ValueOf(m.overlay).UnsafePointer() == reflect.ValueOf(o.overlay).UnsafePointer()
}
