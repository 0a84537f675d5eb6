package dag

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/store"
)

// TestIncrementalEqualsFullBuild is the property that makes incremental builds safe:
// after any sequence of changes, Incremental.Build returns exactly what Build returns
// on the same store. The changes are random but reproducible (the seed is in the
// failure message): objects of every kind added, replaced, replaced by an equal copy and
// deleted, drawn from small pools of names, hosts (precise, wildcard, catch-all, upper
// case), paths, Services and Secrets so that they collide, delegate, include, conflict
// and tie on age all the time.
func TestIncrementalEqualsFullBuild(t *testing.T) {
	const seeds, steps = 30, 80
	incremental := 0
	var (
		opts Options
		inc  *Incremental
	)
	start := func(seed uint64) {
		opts = Options{}
		if seed%4 == 0 {
			opts.RootNamespaces = []string{"default"}
		}
		if seed%5 == 0 {
			opts.AllowExternalName = true
		}
		if seed%3 == 0 {
			// One of the Secrets the changes make, valid and invalid in turn.
			opts.ClientCertificate = &types.NamespacedName{Namespace: "default", Name: "cert"}
		}
		inc = NewIncremental(opts)
		if seed%2 == 1 {
			inc.maxFraction = 1 // never fall back to a full build for size
		}
	}
	dagtest.Run(t, seeds, steps, start, func(s *store.Store, seed uint64, step int, log string) {
		got := inc.Build(s)
		if !inc.LastStats.Full && inc.LastStats.Objects > 0 {
			incremental++
		}
		if inc.LastStats.Reason == ReasonUnaccounted {
			t.Fatalf("seed %d, step %d: the object keys missed an interaction (the safety net rebuilt whole)\nchanges:\n%s", seed, step, log)
		}
		want := Build(s, opts)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d, step %d: incremental build differs from a full build (-full +incremental):\n%s\nchanges:\n%s", seed, step, diff, log)
		}
	})
	// The property only means something if most builds took the incremental path.
	if incremental < seeds*steps/3 {
		t.Fatalf("only %d of %d builds were incremental", incremental, seeds*steps)
	}
}

// TestIncrementalRebuildsOnlyWhatChanged checks that a change to one object of many
// rebuilds its component only, and that the other components keep their virtual hosts
// (pointer for pointer), which the translator relies on to skip them.
func TestIncrementalRebuildsOnlyWhatChanged(t *testing.T) {
	s := store.New()
	for i := range 50 {
		name := fmt.Sprintf("app-%d", i)
		s.Upsert(ing(t, fmt.Sprintf(`
metadata: {name: %s}
spec:
  rules: [{host: %s.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: %s, port: {number: 80}}}}]}}]`, name, name, name)))
		s.Upsert(svc("default", name, "http:80"))
		s.Upsert(endpoints("default", name, "http", 8080, "10.0.0.1"))
	}
	inc := NewIncremental(Options{})
	first := inc.Build(s)
	if !inc.LastStats.Full {
		t.Fatal("the first build must be full")
	}

	edited := s.Ingresses[nsn("default", "app-7")].DeepCopy()
	edited.Spec.Rules[0].HTTP.Paths[0].Path = "/v2"
	s.Upsert(edited)
	second := inc.Build(s)
	if inc.LastStats.Full || inc.LastStats.Objects != 1 {
		t.Fatalf("editing one Ingress rebuilt %+v, want that Ingress only", inc.LastStats)
	}
	if got := routesOf(second, "app-7.example.com"); len(got) != 1 || got[0].Match != "Prefix /v2" {
		t.Fatalf("the edit is not in the graph: %+v", got)
	}
	for i, vh := range second.HTTP {
		if vh.Name != "app-7.example.com" && vh != first.HTTP[i] {
			t.Fatalf("virtual host %s was rebuilt by an edit of another host", vh.Name)
		}
	}

	s.Upsert(endpoints("default", "app-9", "http", 8080, "10.0.0.2"))
	third := inc.Build(s)
	if inc.LastStats.Full || inc.LastStats.Objects != 1 {
		t.Fatalf("an endpoint change rebuilt %+v, want the one Ingress using the Service", inc.LastStats)
	}
	if eps := httpHost(third, "app-9.example.com").Routes[0].Clusters[0].Cluster.Endpoints; len(eps) != 1 || eps[0].Address != "10.0.0.2" {
		t.Fatalf("endpoints not updated: %+v", eps)
	}

	if inc.Build(s) != third {
		t.Fatal("a build with no change must return the same graph")
	}
}

func nsn(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}
