package upstream

import "github.com/cespare/xxhash/v2"

// xxHash64 (XXH64) is the hash Envoy uses for hash policies, ring hash points and Maglev
// permutations: using the same function keeps the proxy's picks identical to Envoy's for
// the same endpoints and requests.

// XXHash64 returns XXH64 of b with the given seed.
func XXHash64(b []byte, seed uint64) uint64 {
	if seed == 0 {
		return xxhash.Sum64(b)
	}
	d := xxhash.NewWithSeed(seed)
	_, _ = d.Write(b)
	return d.Sum64()
}

// XXHash64String is xxHash64 of s with seed 0.
func XXHash64String(s string) uint64 { return xxhash.Sum64String(s) }
