package dag

import (
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The ObjectRef kinds of Gateway API objects: their kind names in gateway.networking.k8s.io.
const (
	KindGatewayClass     = "GatewayClass"
	KindGateway          = "Gateway"
	KindListenerSet      = "ListenerSet"
	KindHTTPRoute        = "HTTPRoute"
	KindGRPCRoute        = "GRPCRoute"
	KindTLSRoute         = "TLSRoute"
	KindBackendTLSPolicy = "BackendTLSPolicy"
)

// GatewayControllerName is the spec.controllerName of the GatewayClasses Portico implements.
const GatewayControllerName gatewayv1.GatewayController = "portico.dev/gateway-controller"

// Gateway is the data plane of one Gateway API Gateway: its listeners, grouped by port.
// Each Gateway has a data plane of its own (an Envoy fleet in a cluster, an embedded
// proxy in `portico run`) that serves these listeners and no others, so that two
// Gateways may both listen on port 80 without meeting.
type Gateway struct {
	// Name is the Gateway's namespace/name.
	Name types.NamespacedName
	// Ports are the ports its programmed listeners (and those of its ListenerSets) listen
	// on, in ascending order.
	Ports []*GatewayPort
}

// GatewayPort is what a Gateway serves on one port. A port carries either clear-text HTTP
// (HTTP listeners) or TLS (HTTPS listeners, which terminate, and TLS listeners, which
// pass through or terminate to a TCP stream): listeners of both kinds on one port are a
// conflict the listener status reports.
type GatewayPort struct {
	Port uint32
	// HTTP are the virtual hosts of HTTP listeners. The host names are those the
	// listeners and routes agree on (hostname intersection): a request for a host that a
	// listener with a more specific hostname owns only ever reaches that listener's routes.
	HTTP []*VirtualHost
	// HTTPS are the server names of HTTPS and TLS listeners.
	HTTPS []*SecureVirtualHost
}

// GatewayAPIStatus is the status subresource of a Gateway API object as one build
// computed it, in the gateway-api module's own types. Conditions carry Type, Status,
// Reason and Message; the status writer fills ObservedGeneration and keeps
// LastTransitionTime while a condition's status holds. Exactly one field is set, the
// one of the object's kind.
type GatewayAPIStatus struct {
	GatewayClass *gatewayv1.GatewayClassStatus
	Gateway      *gatewayv1.GatewayStatus
	ListenerSet  *gatewayv1.ListenerSetStatus
	// Route is the status of an HTTPRoute, GRPCRoute or TLSRoute: one entry per parentRef
	// that names a Gateway (or ListenerSet) of a GatewayClass of Portico's controller.
	// Entries of other controllers are not Portico's: the writer leaves them as they are.
	Route *gatewayv1.RouteStatus
	// Policy is a BackendTLSPolicy's, one ancestor per Gateway whose routes use it.
	Policy *gatewayv1.PolicyStatus
}
