// Package sorted gives the keys of the proxy's name-keyed maps in order, so
// that what the proxy does for each (bind, log, patch) happens in the same
// order every time. It is a leaf.
package sorted

import "sort"

// Keys returns the keys of m, sorted. Inlined, its slice stays on the
// stack for a few keys.
func Keys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
