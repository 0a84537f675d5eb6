// Package gatewayapi builds the Gateway API part of a routing graph: which
// GatewayClasses are Portico's, the data plane of each of their Gateways
// (dag.Gateway: listeners grouped by port, HTTP virtual hosts and HTTPS server
// names), the routes attached to them, and the status of every object.
//
// It runs as a dag.Processor (internal/app passes it in dag.Options.Processors):
// it imports dag and store, and dag never imports it.
//
// # One rule across APIs
//
// Every Gateway has a data plane of its own (its own listeners, named
// gateway/<namespace>/<name>/<port>), so a Gateway API host never shares a
// listener with an Ingress, IngressRoute or HTTPProxy host, nor with another
// Gateway's: the hosts of different APIs are never decided against each other
// in the graph. Where they meet on one address and port in front of Portico (a
// load balancer, a run-mode port mapping), the older object keeps the host, as
// between the other APIs.
//
// # Files by job
//
//	translate.go        the Processor: Process builds everything, NewState incrementally
//	incremental.go      the order of the steps of one build, and what a build keeps for the
//	                    next: a route change processes that route, not every one
//	gatewayclass.go     which classes are Portico's; their status (features.go: supportedFeatures)
//	listener.go         pure listener validation: protocols, conflicts, route kinds
//	gateway.go          Gateways: certificates, listener status, the data plane of each
//	listenerset.go      ListenerSets: which Gateway takes them, their listeners after its own
//	referencegrant.go   ReferenceGrants, indexed once per build: permitted(from, to)
//	hostnames.go        listener x route hostname intersection and listener isolation (pure)
//	attach.go           parentRefs: which listeners of which Gateways (or ListenerSets) a route attaches to
//	httproute.go        HTTPRoute rules -> graph routes; precedence.go orders them
//	grpcroute.go        GRPCRoute rules -> graph routes (a method is a path, POST only)
//	tlsroute.go         TLSRoutes -> server names of TLS listeners (passed through or terminated)
//	routestatus.go      routes attached to parents; HTTPRoute/GRPCRoute hostname
//	                    conflicts; attachedRoutes; route status
//	dataplane.go        a served Gateway's ports, hosts and server names (dag.Gateway), kept
//	                    between builds: a route's change builds the hosts it serves again
//	filters.go          one function per HTTPRoute filter type
//	backendref.go       backendRefs -> clusters, with the ResolvedRefs reasons
//	backendtlspolicy.go BackendTLSPolicies: the targeted backends' clusters speak verified TLS
//	conditions.go       errors carrying condition type and reason; conditions to dag.Status
//	admission.go        one object's status problems, built with only what they depend on
//	                    (the admission webhook's warnings)
package gatewayapi
