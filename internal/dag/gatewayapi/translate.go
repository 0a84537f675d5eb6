package gatewayapi

import (
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// Processor builds the Gateway API part of a graph; pass it in dag.Options.Processors.
type Processor struct {
	// Addresses, when set, says where each served Gateway's data plane is reached, for
	// its status.addresses and Programmed condition; nil leaves addresses empty.
	Addresses AddressSource
}

// AddressSource says where a Gateway's own data plane is reached.
type AddressSource interface {
	// Addresses are the addresses of gw's data plane. When it has none yet, or cannot
	// answer there yet (no ready replica), pending says why and what to do: the Gateway
	// is not Programmed until it has an address (reason AddressNotAssigned) and a ready
	// data plane behind it (reason Pending). Objects it reads through p (its Service and
	// endpoints) make the processor run again when they change.
	Addresses(p *dag.Processing, gw types.NamespacedName) (addrs []gatewayv1.GatewayStatusAddress, pending string)
}

// Kinds are the store kinds the processor reads whole.
func (Processor) Kinds() []store.Kind {
	return []store.Kind{store.KindNamespace, store.KindGatewayClass, store.KindGateway, store.KindListenerSet, store.KindHTTPRoute, store.KindGRPCRoute,
		store.KindTLSRoute, store.KindReferenceGrant, store.KindBackendTLSPolicy, store.KindConfigMap, store.KindGatewayAPICRD}
}

// Process runs the steps in their order: classes, grants, Gateways and their
// listeners, ListenerSets (their listeners after their Gateway's), routes (attached
// to listeners; an HTTPRoute and a GRPCRoute never share a hostname on a listener),
// BackendTLSPolicies (applied to the attached routes' backends), then a final pass
// that builds each served Gateway's data plane and writes every status.
func (pr Processor) Process(p *dag.Processing) {
	s := p.Store()
	classes := processClasses(p)
	grants := indexGrants(s)
	gateways := processGateways(p, classes, grants)
	byKey := make(map[types.NamespacedName]*gatewayResult, len(gateways))
	for _, g := range gateways {
		byKey[g.key] = g
	}
	processListenerSets(p, byKey, grants)
	routes := append(processHTTPRoutes(p, grants, byKey), processGRPCRoutes(p, grants, byKey)...)
	refuseKindConflicts(routes)
	routes = append(routes, processTLSRoutes(p, grants, byKey)...)
	countAttachedRoutes(routes)
	policies := indexPolicies(p)
	applyPolicies(p, policies, routes)
	for _, g := range gateways {
		if g.served() {
			p.AddGateway(dataPlane(g, routes))
			if pr.Addresses != nil {
				g.addresses, g.awaitingAddress = pr.Addresses.Addresses(p, g.key)
			}
		}
		p.AddStatus(g.status())
		for _, set := range g.sets {
			p.AddStatus(set.status())
		}
	}
	for _, r := range routes {
		if st, ok := r.status(); ok {
			p.AddStatus(st)
		}
	}
	for _, pol := range policies.all {
		if st, ok := pol.status(); ok {
			p.AddStatus(st)
		}
	}
}
