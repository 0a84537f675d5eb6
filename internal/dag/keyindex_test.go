package dag

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestKeyIndexMatchesSets checks keyIndex against plain sets over random additions and
// removals, a key's first object removed while others hold it included.
func TestKeyIndexMatchesSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"h:a", "h:b", "s:ns/svc"}
	refs := []ObjectRef{{Kind: KindIngress, Namespace: "ns", Name: "a"}, {Kind: KindIngress, Namespace: "ns", Name: "b"},
		{Kind: KindHTTPProxy, Namespace: "ns", Name: "c"}, {Kind: KindHTTPProxy, Namespace: "other", Name: "a"}}
	ix := keyIndex{}
	want := map[string]map[ObjectRef]bool{}
	for i := range 5000 {
		key, ref := keys[rng.IntN(len(keys))], refs[rng.IntN(len(refs))]
		had := len(want[key]) > 0
		if rng.IntN(2) == 0 {
			if want[key] == nil {
				want[key] = map[ObjectRef]bool{}
			}
			want[key][ref] = true
			if got := ix.add(key, ref); got != !had {
				t.Fatalf("op %d: add(%s, %v) = %v, want %v", i, key, ref, got, !had)
			}
		} else {
			delete(want[key], ref)
			gone := had && len(want[key]) == 0
			if got := ix.remove(key, ref); got != gone {
				t.Fatalf("op %d: remove(%s, %v) = %v, want %v", i, key, ref, got, gone)
			}
		}
		for _, k := range keys {
			got := map[ObjectRef]bool{}
			for ref := range ix.refs(k) {
				got[ref] = true
			}
			if !maps.Equal(got, want[k]) && len(got)+len(want[k]) > 0 {
				t.Fatalf("op %d: %s holds %v, want %v", i, k, got, want[k])
			}
			if ix.has(k) != (len(want[k]) > 0) {
				t.Fatalf("op %d: has(%s) = %v, want %v", i, k, ix.has(k), len(want[k]) > 0)
			}
		}
	}
}
