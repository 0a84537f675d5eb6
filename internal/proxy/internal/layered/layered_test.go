package layered

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// A layered map patched generation after generation reads as a plain map
// given the same writes, and every earlier generation reads as it did when
// it was settled: patches never write through to what they share.
func TestLayeredMapPatchesLeaveEarlierGenerations(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			keys := 50 + rng.IntN(400)
			want := make(map[string]int)
			m := New[string, int](0)
			for i := range keys / 2 {
				k := fmt.Sprint("k", rng.IntN(keys))
				m.Set(k, i)
				want[k] = i
			}
			m.Settle()
			type generation struct {
				m    Map[string, int]
				want map[string]int
			}
			var gens []generation
			folds := 0
			for step := range 200 {
				gens = append(gens, generation{m, maps.Clone(want)})
				next := m.Patched()
				for range 1 + rng.IntN(12) {
					k := fmt.Sprint("k", rng.IntN(keys))
					if rng.IntN(3) == 0 {
						next.Remove(k)
						delete(want, k)
					} else {
						next.Set(k, step)
						want[k] = step
					}
				}
				next.Settle()
				if !next.Overlaid() && m.Overlaid() {
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

func checkLayered(t *testing.T, when string, m *Map[string, int], want map[string]int, keys int) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("%s: len %d, want %d", when, m.Len(), len(want))
	}
	for i := range keys {
		k := fmt.Sprint("k", i)
		v, ok := m.Get(k)
		w, wok := want[k]
		if ok != wok || v != w {
			t.Fatalf("%s: get(%q) = %d, %t; want %d, %t", when, k, v, ok, w, wok)
		}
	}
}
