package translate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/store"
)

// TestIncrementalTranslationEqualsFull holds the incremental pipeline (dag.Incremental
// and Incremental) to the full one (dag.Build and Translate) over random change
// sequences: every resource must be the same, in the same order, and every cluster a
// route sends to must be published.
func TestIncrementalTranslationEqualsFull(t *testing.T) {
	incrementalTranslationEqualsFull(t, 30, 60, dagtest.Run, dag.Options{})
}

// incrementalTranslationEqualsFull checks the property over the changes run makes,
// building with dopts.
func incrementalTranslationEqualsFull(t *testing.T, seeds, steps int, run func(testing.TB, int, int, func(uint64), dagtest.Check), dopts dag.Options) {
	opts := Options{HTTPSRedirectPort: 8443}
	var (
		builder *dag.Incremental
		tr      *Incremental
	)
	start := func(uint64) {
		builder = dag.NewIncremental(dopts)
		var err error
		if tr, err = NewIncremental(opts); err != nil {
			t.Fatal(err)
		}
	}
	run(t, seeds, steps, start, func(s *store.Store, seed uint64, step int, log string) {
		got, err := tr.Translate(builder.Build(s))
		if err != nil {
			t.Fatalf("seed %d, step %d: %v", seed, step, err)
		}
		want, err := Translate(dag.Build(s, dopts), opts)
		if err != nil {
			t.Fatalf("seed %d, step %d: full translation: %v", seed, step, err)
		}
		if missing := unpublishedClusters(t, want); len(missing) > 0 {
			t.Fatalf("seed %d, step %d: routes to clusters that are not published: %q\nchanges:\n%s", seed, step, missing, log)
		}
		// Incremental orders clusters and load assignments by name.
		sortByName(want.Clusters)
		sortByName(want.Endpoints)
		if sameResources(want, got) {
			return
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Fatalf("seed %d, step %d: incremental resources differ (-full +incremental):\n%s\nchanges:\n%s", seed, step, diff, log)
		}
	})
}

// TestIncrementalTranslationReusesUnchanged checks that one changed host of many is the
// only thing translated again, and that everything else is returned as the very same
// resource, which is how the xDS server knows not to send it.
func TestIncrementalTranslationReusesUnchanged(t *testing.T) {
	s := store.New()
	prefix := networkingv1.PathTypePrefix
	for i := range 40 {
		name := fmt.Sprintf("app-%d", i)
		s.Upsert(&networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
				Host: name + ".example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
					Path: "/", PathType: &prefix,
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: 80}}},
				}}}},
			}}},
		})
		s.Upsert(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
	}
	builder := dag.NewIncremental(dag.Options{})
	tr, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := tr.Translate(builder.Build(s))
	if err != nil {
		t.Fatal(err)
	}

	s.Upsert(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-3"},
		Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Port: 8080}}, Addresses: []corev1.EndpointAddress{{IP: "10.0.0.3"}}}}})
	second, err := tr.Translate(builder.Build(s))
	if err != nil {
		t.Fatal(err)
	}
	// The Ingress of app-3 is rebuilt: its virtual host and its cluster.
	if tr.Retranslated != 2 {
		t.Fatalf("translated %d parts again, want 2 (one virtual host, one cluster)", tr.Retranslated)
	}
	changed := 0
	for i := range first.Endpoints {
		if first.Endpoints[i] != second.Endpoints[i] {
			changed++
		}
	}
	if changed != 1 {
		t.Fatalf("%d load assignments are new objects, want 1", changed)
	}
	for i := range first.Clusters {
		if first.Clusters[i] != second.Clusters[i] {
			t.Fatalf("cluster %d is a new object although it did not change", i)
		}
	}
	if first.Listeners[0] != second.Listeners[0] {
		t.Fatal("the HTTP listener is a new object although it did not change")
	}
	// Endpoints moved, routes did not: the route configuration is not sent again.
	if first.Routes[0] != second.Routes[0] {
		t.Fatal("an endpoint change made a new route configuration")
	}
	third, err := tr.Translate(builder.Build(s))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Retranslated != 0 || third.Routes[0] != second.Routes[0] {
		t.Fatalf("nothing changed, yet %d parts were translated again", tr.Retranslated)
	}
}

func sortByName(rs []types.Resource) {
	slices.SortStableFunc(rs, func(a, b types.Resource) int {
		return strings.Compare(cache.GetResourceName(a), cache.GetResourceName(b))
	})
}

// sameResources is a fast equality check; cmp with protocmp explains a difference.
func sameResources(a, b *Resources) bool {
	la, lb := resourceLists(a), resourceLists(b)
	for i := range la {
		if len(la[i]) != len(lb[i]) {
			return false
		}
		for j := range la[i] {
			if !proto.Equal(la[i][j], lb[i][j]) {
				return false
			}
		}
	}
	return true
}

// resourceLists are r's lists of resources, by type.
func resourceLists(r *Resources) [][]types.Resource {
	return [][]types.Resource{r.Listeners, r.Routes, r.Clusters, r.Endpoints, r.Secrets}
}
