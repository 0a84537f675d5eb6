package gatewayapi

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

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

// TestMisdirectedHosts: on a port's server name, the hostnames the port's other
// listeners serve within it answer 421 (conformance:
// HTTPRouteHTTPSListenerDetectMisdirectedRequests); nothing outside it (the translator
// answers 421 to those) and never the name itself.
func TestMisdirectedHosts(t *testing.T) {
	owners := []string{"", "second.example.org", "*.wildcard.org", "fourth.wildcard.org"}
	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	for name, want := range map[string][]string{
		"*":                   {"*.wildcard.org", "fourth.wildcard.org", "second.example.org"},
		"*.wildcard.org":      {"fourth.wildcard.org"},
		"second.example.org":  nil,
		"fourth.wildcard.org": nil,
	} {
		var got []string
		for _, vh := range misdirectedHosts(gw, name, owners) {
			got = append(got, vh.Name)
			if len(vh.Routes) != 1 || vh.Routes[0].DirectStatus != 421 {
				t.Errorf("%s: host %s answers %+v, want 421", name, vh.Name, vh.Routes)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("server name %s: 421 hosts %v, want %v", name, got, want)
		}
	}
}
