package gatewayapi

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/store"
)

// incrementalEqualsFull holds dag.Incremental to dag.Build with the Gateway API
// processor over random sequences of edits of every kind, Gateway API objects included
// (and the Services, Secrets, ConfigMaps and Namespaces they use), handing each full
// build to observe.
func incrementalEqualsFull(t *testing.T, seeds, steps int, observe func(*dag.Graph)) {
	incrementalEqualsFullOn(t, dagtest.RunGatewayAPI, seeds, steps, func(_ *dag.Incremental, want *dag.Graph) { observe(want) })
}

// incrementalEqualsFullOn is incrementalEqualsFull over the sequences run makes,
// observe given the builder too.
func incrementalEqualsFullOn(t *testing.T, run func(testing.TB, int, int, func(uint64), dagtest.Check), seeds, steps int,
	observe func(*dag.Incremental, *dag.Graph)) {
	opts := dag.Options{Processors: []dag.Processor{Processor{}}}
	var inc *dag.Incremental
	start := func(uint64) { inc = dag.NewIncremental(opts) }
	run(t, seeds, steps, start, func(s *store.Store, seed uint64, step int, log string) {
		got := inc.Build(s)
		want := dag.Build(s, opts)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d, step %d: incremental build differs from a full build (-full +incremental):\n%s\nchanges:\n%s", seed, step, diff, log)
		}
		observe(inc, want)
	})
}

func TestIncrementalEqualsFullWithGatewayAPI(t *testing.T) {
	const seeds, steps = 20, 80
	served, routed := 0, 0
	incrementalEqualsFull(t, seeds, steps, func(want *dag.Graph) {
		if len(want.Gateways) > 0 {
			served++
		}
		for _, gw := range want.Gateways {
			for _, p := range gw.Ports {
				for _, vh := range p.HTTP {
					if len(vh.Routes) > 0 {
						routed++
					}
				}
				for _, svh := range p.HTTPS {
					if svh.TCPProxy != nil {
						routed++
					}
				}
			}
		}
	})
	// The property only means something if Gateways were served, with routes.
	if served < seeds*steps/8 || routed < seeds*steps/20 {
		t.Fatalf("only %d builds served a Gateway and %d hosts had routes, of %d builds", served, routed, seeds*steps)
	}
}

// TestIncrementalEqualsFullWithListenerSetsAndPolicies is the property over more
// sequences, so that enough of them attach ListenerSets to Gateways and apply
// BackendTLSPolicies to the backends of attached routes (both need several objects to
// meet).
func TestIncrementalEqualsFullWithListenerSetsAndPolicies(t *testing.T) {
	const seeds, steps = 60, 80
	sets, verified := 0, 0
	incrementalEqualsFull(t, seeds, steps, func(want *dag.Graph) {
		for _, st := range want.Statuses {
			if ls := st.GatewayAPI; ls != nil && ls.ListenerSet != nil && ls.ListenerSet.Conditions[0].Status == metav1.ConditionTrue {
				sets++
			}
		}
		for _, c := range want.Clusters() {
			if c.UpstreamValidation != nil {
				verified++
			}
		}
	})
	if sets < 10 || verified < 40 {
		t.Fatalf("only %d accepted ListenerSets and %d verified clusters over %d builds", sets, verified, seeds*steps)
	}
}

// TestIncrementalEqualsFullOnRouteChanges is the property over sequences made mostly of
// route changes (and of the Services, endpoints and Secrets routes use), where the
// processor processes only the routes that changed: it must still build what a full
// build does, statuses included.
func TestIncrementalEqualsFullOnRouteChanges(t *testing.T) {
	const seeds, steps = 40, 100
	partial, whole := 0, map[string]int{}
	incrementalEqualsFullOn(t, dagtest.RunGatewayAPIRoutes, seeds, steps, func(inc *dag.Incremental, _ *dag.Graph) {
		if why := inc.LastStats.ProcessorsFull; why != "" {
			whole[why]++
		} else if refs, all := inc.Touched(); !all && slices.ContainsFunc(refs, isRoute) {
			partial++
		}
	})
	t.Logf("routes processed in part in %d builds; whole: %v", partial, whole)
	// The property only says something about the incremental path if it was taken.
	if partial < seeds*steps/3 {
		t.Fatalf("only %d of %d builds processed routes in part (whole: %v)", partial, seeds*steps, whole)
	}
}

func isRoute(ref dag.ObjectRef) bool {
	return ref.Kind == dag.KindHTTPRoute || ref.Kind == dag.KindGRPCRoute || ref.Kind == dag.KindTLSRoute
}
