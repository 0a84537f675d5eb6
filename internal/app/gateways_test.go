package app

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/provision"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// A ListenerSet's listener on a port of its own is reachable: the data plane's Service
// exposes it beside the Gateway's own ports.
func TestProvisionedPortsIncludeListenerSets(t *testing.T) {
	s := store.FromObjects(testutil.DecodeObjects(t, gatewayWithListenerSet))
	g := dag.Build(s, withGatewayAPI(dag.Options{}))
	if len(g.Gateways) != 1 {
		t.Fatalf("%d Gateways served, want 1", len(g.Gateways))
	}
	gw := s.Gateways[types.NamespacedName{Namespace: "default", Name: "gw"}]
	svc := provision.Service(withServedPorts(gw, g.Gateways[0]), provision.Options{})
	var ports []int32
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Port)
	}
	if !slices.Equal(ports, []int32{80, 8080}) {
		t.Errorf("the data plane's Service exposes ports %v, want [80 8080]", ports)
	}
	if len(gw.Spec.Listeners) != 1 {
		t.Errorf("the stored Gateway was changed: %d listeners", len(gw.Spec.Listeners))
	}
}
