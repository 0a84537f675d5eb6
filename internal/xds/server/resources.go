package server

import (
	"maps"
	"sync/atomic"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// resourceSet is the published resources of one type by name, with their versions. It
// is never modified once made: with returns a new one. A change of one resource among
// 10,000 must not copy 10,000 map entries, so a set is a flat map shared between sets
// (base) plus the changes made since (overlay), folded into a new flat map once the
// overlay has grown to about the square root of the size: copying n entries every √n
// changes costs about √n entries per change, as copying the overlay does.
//
// The flat maps go-control-plane reads (GetResources, GetVersionMap) are made on first
// use only: a type that no client watches never needs them.
type resourceSet struct {
	base *flatSet
	// overlay holds the resources set since base, and a zero versioned for each one of
	// base removed since.
	overlay map[string]versioned
	size    int
	// flat is base with overlay applied, once made; base itself when overlay is empty.
	flat atomic.Pointer[flatSet]
}

// flatSet is a whole resource set as plain maps. Never modified once made. The
// resources are *encoded.
type flatSet struct {
	resources map[string]types.Resource
	versions  map[string]string
}

type versioned struct {
	resource *encoded
	version  string
}

func newResourceSet(f *flatSet) *resourceSet {
	s := &resourceSet{base: f, size: len(f.resources)}
	s.flat.Store(f)
	return s
}

var emptyResourceSet = newResourceSet(&flatSet{resources: map[string]types.Resource{}, versions: map[string]string{}})

// get returns the named resource and its version.
func (s *resourceSet) get(name string) (versioned, bool) {
	if v, ok := s.overlay[name]; ok {
		return v, v.resource != nil
	}
	r, ok := s.base.resources[name]
	if !ok {
		return versioned{}, false
	}
	return versioned{resource: r.(*encoded), version: s.base.versions[name]}, true
}

func (s *resourceSet) len() int { return s.size }

// names yields the name of every resource in the set.
func (s *resourceSet) names(yield func(string) bool) {
	for name, v := range s.overlay {
		if v.resource != nil && !yield(name) {
			return
		}
	}
	for name := range s.base.resources {
		if _, over := s.overlay[name]; !over && !yield(name) {
			return
		}
	}
}

// flatten returns the set as flat maps, made on the first call. Safe for concurrent use:
// calls racing to make them make equal maps, and either is kept.
func (s *resourceSet) flatten() *flatSet {
	if f := s.flat.Load(); f != nil {
		return f
	}
	if len(s.overlay) == 0 {
		s.flat.Store(s.base)
		return s.base
	}
	f := &flatSet{resources: make(map[string]types.Resource, s.size), versions: make(map[string]string, s.size)}
	for name, r := range s.base.resources {
		if _, over := s.overlay[name]; !over {
			f.resources[name] = r
			f.versions[name] = s.base.versions[name]
		}
	}
	for name, v := range s.overlay {
		if v.resource != nil {
			f.resources[name] = v.resource
			f.versions[name] = v.version
		}
	}
	s.flat.Store(f)
	return f
}

// with returns the set with the changed resources (of the versions given by name) set
// and the removed names gone.
func (s *resourceSet) with(changed []*encoded, versions map[string]string, removed []string) *resourceSet {
	next := &resourceSet{base: s.base, size: s.size}
	if f := s.flat.Load(); f != nil {
		next.base = f // already made: start from it with nothing on top
	} else {
		next.overlay = maps.Clone(s.overlay)
	}
	if next.overlay == nil {
		next.overlay = make(map[string]versioned, len(changed)+len(removed))
	}
	for _, r := range changed {
		name := r.name
		if _, ok := next.get(name); !ok {
			next.size++
		}
		next.overlay[name] = versioned{resource: r, version: versions[name]}
	}
	for _, name := range removed {
		if _, ok := next.get(name); !ok {
			continue
		}
		next.size--
		if _, inBase := next.base.resources[name]; inBase {
			next.overlay[name] = versioned{}
		} else {
			delete(next.overlay, name)
		}
	}
	if o := len(next.overlay); o*o > 2*next.size {
		next.base, next.overlay = next.flatten(), nil
	}
	return next
}
