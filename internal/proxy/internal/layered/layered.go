// Package layered is the map a compiled configuration shares with the one
// patched from it (Map): the snapshot's clusters and the route tables'
// domain indexes. It is a leaf: it imports nothing of the proxy.
package layered

import (
	"maps"
	"math"
	"reflect"
)

// Map is a map that a configuration shares with the one patched from it.
// Requests read it while the next configuration is compiled, so a shared map
// is never written: a patch writes to an overlay of its own over the base it
// shares (Patched), and the overlay is folded into a new base once it grows
// past about √n entries (Settle). A patch then costs in proportion to what it
// changes, and each fold's cost in n is spread over √n patches.
//
// Only the compilation that made a layered map (New or Patched) writes
// to it, and only until Settle; after that it is read-only.
type Map[K comparable, V any] struct {
	base    map[K]V
	overlay map[K]layer[V] // nil when not patched, or folded
	n       int            // entries present
}

// layer is an overlay entry: a value set by the patch, or a removal.
type layer[V any] struct {
	v    V
	gone bool
}

// New returns an empty map with room for size entries.
func New[K comparable, V any](size int) Map[K, V] {
	return Map[K, V]{base: make(map[K]V, size)}
}

// FromMap returns m as a layered map, which owns it from then on.
func FromMap[K comparable, V any](m map[K]V) Map[K, V] {
	return Map[K, V]{base: m, n: len(m)}
}

// Get costs one lookup, and a second only while there is an overlay.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if m.overlay != nil {
		if e, ok := m.overlay[k]; ok {
			return e.v, !e.gone
		}
	}
	v, ok := m.base[k]
	return v, ok
}

// Len returns the number of entries.
func (m *Map[K, V]) Len() int { return m.n }

// Made reports whether m was made (New, Patched, FromMap), unlike a zero value.
func (m *Map[K, V]) Made() bool { return m.base != nil }

// Set sets k to v.
func (m *Map[K, V]) Set(k K, v V) {
	if _, had := m.Get(k); !had {
		m.n++
	}
	if m.overlay != nil {
		m.overlay[k] = layer[V]{v: v}
	} else {
		m.base[k] = v
	}
}

// Remove removes k.
func (m *Map[K, V]) Remove(k K) {
	if _, had := m.Get(k); !had {
		return
	}
	m.n--
	if m.overlay == nil {
		delete(m.base, k)
		return
	}
	if _, inBase := m.base[k]; inBase {
		m.overlay[k] = layer[V]{gone: true}
	} else {
		delete(m.overlay, k)
	}
}

// Patched returns a copy of m whose writes leave m, and the base they share,
// as they are.
func (m Map[K, V]) Patched() Map[K, V] {
	if m.overlay == nil {
		m.overlay = make(map[K]layer[V])
	} else {
		m.overlay = maps.Clone(m.overlay)
	}
	return m
}

// Settle ends a patch: an empty overlay goes, and one past about √n entries
// is folded into a new base.
func (m *Map[K, V]) Settle() {
	switch {
	case m.overlay == nil:
	case len(m.overlay) == 0:
		m.overlay = nil
	case len(m.overlay) > int(math.Sqrt(float64(len(m.base))))+16:
		base := maps.Clone(m.base)
		for k, e := range m.overlay {
			if e.gone {
				delete(base, k)
			} else {
				base[k] = e.v
			}
		}
		m.base, m.overlay = base, nil
	}
}

// The methods below are for checks (tests) of what a patch shares.

// Flat returns m as a plain map.
func (m *Map[K, V]) Flat() map[K]V {
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

// Overlaid reports whether m has an overlay: a patch not folded yet.
func (m *Map[K, V]) Overlaid() bool { return m.overlay != nil }

// Shares reports whether m and o are the same maps (one shared, not a patch of the other).
func (m *Map[K, V]) Shares(o *Map[K, V]) bool {
	return reflect.ValueOf(m.base).UnsafePointer() == reflect.ValueOf(o.base).UnsafePointer() &&
		reflect.ValueOf(m.overlay).UnsafePointer() == reflect.ValueOf(o.overlay).UnsafePointer()
}
