package server

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
)

// A resource set holds, after any sequence of changes, exactly what a plain map given
// the same changes holds, whether or not its flat maps were made in between; and the
// sets it was made from still hold what they held.
func TestResourceSetEqualsMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type model struct {
		set  *resourceSet
		want map[string]versioned
	}
	history := []model{{emptyResourceSet, map[string]versioned{}}}
	for step := range 3000 {
		prev := history[len(history)-1]
		want := maps.Clone(prev.want)
		var changed []*encoded
		versions := map[string]string{}
		var removed []string
		for range 1 + rng.IntN(4) {
			name := fmt.Sprintf("c%d", rng.IntN(60))
			if rng.IntN(3) == 0 {
				removed = append(removed, name)
				continue
			}
			if _, dup := versions[name]; dup {
				continue
			}
			r := encode(&clusterv3.Cluster{Name: name}, nil)
			changed = append(changed, r)
			versions[name] = fmt.Sprint(step)
		}
		removed = slices.DeleteFunc(removed, func(n string) bool { _, set := versions[n]; return set })
		for _, r := range changed {
			name := r.name
			want[name] = versioned{resource: r, version: versions[name]}
		}
		for _, name := range removed {
			delete(want, name)
		}
		set := prev.set.with(changed, versions, removed)
		if rng.IntN(5) == 0 {
			set.flatten() // as a watching client would, between publishes
		}
		history = append(history, model{set, want})
	}
	for i, m := range history {
		checkResourceSet(t, i, m.set, m.want)
	}
}

func checkResourceSet(t *testing.T, step int, s *resourceSet, want map[string]versioned) {
	t.Helper()
	if s.len() != len(want) {
		t.Fatalf("step %d: len %d, want %d", step, s.len(), len(want))
	}
	var names []string
	for name := range s.names {
		names = append(names, name)
	}
	if got, exp := slices.Sorted(slices.Values(names)), slices.Sorted(maps.Keys(want)); !slices.Equal(got, exp) {
		t.Fatalf("step %d: names %v, want %v", step, got, exp)
	}
	for name, w := range want {
		if got, ok := s.get(name); !ok || got != w {
			t.Fatalf("step %d: %s = %v %t, want %v", step, name, got, ok, w)
		}
	}
	if _, ok := s.get("absent"); ok {
		t.Fatalf("step %d: an absent name is present", step)
	}
	f := s.flatten()
	if len(f.resources) != len(want) || len(f.versions) != len(want) {
		t.Fatalf("step %d: flat maps of %d and %d, want %d", step, len(f.resources), len(f.versions), len(want))
	}
	for name, w := range want {
		if f.resources[name] != types.Resource(w.resource) || f.versions[name] != w.version {
			t.Fatalf("step %d: flat %s differs", step, name)
		}
	}
}
