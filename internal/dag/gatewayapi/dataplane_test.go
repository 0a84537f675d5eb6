package gatewayapi

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/portico-dev/portico/internal/dag"
)

// TestRouteSetAgainstAMap adds and removes routes at random, past the length from which
// a routeSet is indexed and back, and requires the values a map holds.
func TestRouteSetAgainstAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var rs routeSet[int]
	want := map[dag.ObjectRef]int{}
	for step := range 20000 {
		ref := dag.ObjectRef{Kind: dag.KindHTTPRoute, Namespace: "ns", Name: fmt.Sprintf("r%d", rng.IntN(3*routeSetIndexed))}
		if rng.IntN(2) == 0 {
			_, had := want[ref]
			if added := rs.add(ref, func() int { return step }); added == had {
				t.Fatalf("step %d: add(%s) = %v with the route there: %v", step, ref.Name, added, had)
			}
			if !had {
				want[ref] = step
			}
		} else {
			rs.remove(ref)
			delete(want, ref)
		}
		if len(rs.items) != len(want) {
			t.Fatalf("step %d: %d routes, want %d", step, len(rs.items), len(want))
		}
		for ref, v := range want {
			if i := rs.find(ref); i < 0 || rs.items[i].v != v {
				t.Fatalf("step %d: %s not found with value %d", step, ref.Name, v)
			}
		}
	}
}
