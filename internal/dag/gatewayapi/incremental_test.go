package gatewayapi

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/store"
)

// TestIncrementalEqualsFullWithGatewayAPI holds dag.Incremental to dag.Build with the
// Gateway API processor, over random sequences of edits of every kind, Gateway API
// objects included (and the Services, Secrets and Namespaces they use).
func TestIncrementalEqualsFullWithGatewayAPI(t *testing.T) {
	const seeds, steps = 20, 80
	opts := dag.Options{Processors: []dag.Processor{Processor{}}}
	var inc *dag.Incremental
	served, routed := 0, 0
	start := func(uint64) { inc = dag.NewIncremental(opts) }
	dagtest.RunGatewayAPI(t, seeds, steps, start, func(s *store.Store, seed uint64, step int, log string) {
		got := inc.Build(s)
		want := dag.Build(s, opts)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d, step %d: incremental build differs from a full build (-full +incremental):\n%s\nchanges:\n%s", seed, step, diff, log)
		}
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
