package proxy

import (
	"maps"
	"math"
)

// layered is a map that a configuration shares with the one patched from it.
// Requests read it while the next configuration is compiled, so a shared map
// is never written: a patch writes to an overlay of its own over the base it
// shares (patched), and the overlay is folded into a new base once it grows
// past about √n entries (settle). A patch then costs in proportion to what it
// changes, and each fold's cost in n is spread over √n patches.
//
// Only the compilation that made a layered map (newLayered or patched) writes
// to it, and only until settle; after that it is read-only.
type layered[K comparable, V any] struct {
	base    map[K]V
	overlay map[K]layer[V] // nil when not patched, or folded
	n       int            // entries present
}

// layer is an overlay entry: a value set by the patch, or a removal.
type layer[V any] struct {
	v    V
	gone bool
}

func newLayered[K comparable, V any](size int) layered[K, V] {
	return layered[K, V]{base: make(map[K]V, size)}
}

// get costs one lookup, and a second only while there is an overlay.
func (m *layered[K, V]) get(k K) (V, bool) {
	if m.overlay != nil {
		if e, ok := m.overlay[k]; ok {
			return e.v, !e.gone
		}
	}
	v, ok := m.base[k]
	return v, ok
}

func (m *layered[K, V]) len() int { return m.n }

func (m *layered[K, V]) set(k K, v V) {
	if _, had := m.get(k); !had {
		m.n++
	}
	if m.overlay != nil {
		m.overlay[k] = layer[V]{v: v}
	} else {
		m.base[k] = v
	}
}

func (m *layered[K, V]) remove(k K) {
	if _, had := m.get(k); !had {
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

// patched returns a copy of m whose writes leave m, and the base they share,
// as they are.
func (m layered[K, V]) patched() layered[K, V] {
	if m.overlay == nil {
		m.overlay = make(map[K]layer[V])
	} else {
		m.overlay = maps.Clone(m.overlay)
	}
	return m
}

// settle ends a patch: an empty overlay goes, and one past about √n entries
// is folded into a new base.
func (m *layered[K, V]) settle() {
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
