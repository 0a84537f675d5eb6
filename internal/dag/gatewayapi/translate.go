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

// Process builds everything (incremental.go's rebuild: the steps in their order) and
// adds it to p.
func (pr Processor) Process(p *dag.Processing) {
	b := &state{pr: pr}
	b.rebuild(p)
	for _, gw := range b.gateways {
		p.AddGateway(gw)
	}
	p.AddStatuses(b.statuses)
}

// NewState returns the memory of an incremental builder's Gateway API builds: a route
// change processes that route again, not every route.
func (pr Processor) NewState() dag.ProcessorState { return &state{pr: pr} }
