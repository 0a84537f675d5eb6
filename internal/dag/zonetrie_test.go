package dag

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The zone trie agrees with a brute-force longest-prefix search.
func TestZoneTrieFindsTheLongestPrefix(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b strings.Builder
		b.WriteByte('/')
		for i := r.IntN(6); i > 0; i-- {
			b.WriteByte("ab/"[r.IntN(3)])
		}
		return b.String()
	}
	for round := 0; round < 200; round++ {
		root := &zone{}
		tr := &zoneTrie{zone: root}
		zones := map[string]*zone{"": root}
		for i := r.IntN(12); i > 0; i-- {
			z := &zone{prefix: word()}
			tr.insert(z)
			zones[z.prefix] = z
		}
		for i := 0; i < 50; i++ {
			p := word() + word()
			var want *zone
			for prefix, z := range zones {
				if strings.HasPrefix(p, prefix) && (want == nil || len(prefix) > len(want.prefix)) {
					want = z
				}
			}
			if got := tr.lookup(p); got != want {
				t.Fatalf("lookup(%q) = %q, want %q (zones %v)", p, got.prefix, want.prefix, zones)
			}
		}
	}
}
