package gatewayapi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// The route kinds, as parentRefs and ReferenceGrants name them.
const (
	httpRouteKind gatewayv1.Kind = "HTTPRoute"
	grpcRouteKind gatewayv1.Kind = "GRPCRoute"
	tlsRouteKind  gatewayv1.Kind = "TLSRoute"
)

// Service appProtocols with a meaning for HTTPRoute backends (KEP-3726).
const (
	appProtocolH2C = "kubernetes.io/h2c"
	appProtocolWS  = "kubernetes.io/ws"
	appProtocolWSS = "kubernetes.io/wss"
)

// backends is what a rule's backendRefs resolve to.
type backends struct {
	clusters []*dag.WeightedCluster
	// invalidWeight is the weight of the refs that cannot be used: that share of the
	// rule's requests is answered 500.
	invalidWeight uint32
	websocket     bool
	// err is the first ref's problem: the route's ResolvedRefs condition.
	err *condError
}

// processBackendRefs resolves an HTTPRoute rule's backendRefs to clusters. Only
// Services are supported; a Service of another namespace needs a ReferenceGrant there.
// A ref with weight 0 receives no requests and is left out.
func processBackendRefs(p *dag.Processing, grants grantIndex, kind gatewayv1.Kind, routeNS string, refs []gatewayv1.HTTPBackendRef) backends {
	var out backends
	for i, ref := range refs {
		field := fmt.Sprintf("backendRefs[%d]", i)
		weight := int32(1)
		if ref.Weight != nil {
			weight = *ref.Weight
		}
		if weight <= 0 {
			// Weight 0 receives no requests: whether the ref is usable makes no
			// difference to them, but its status still says.
			weight = 0
		}
		c, ws, err := resolveBackend(p, grants, kind, routeNS, ref.BackendObjectReference, field)
		if err != nil {
			out.invalidWeight += uint32(weight)
			if out.err == nil {
				out.err = err
			}
			continue
		}
		if weight == 0 {
			continue
		}
		wc := &dag.WeightedCluster{Cluster: c, Weight: uint32(weight)}
		for _, f := range ref.Filters {
			var err *condError
			switch f.Type {
			case gatewayv1.HTTPRouteFilterRequestHeaderModifier:
				wc.RequestHeaders, err = headerModifier(f.RequestHeaderModifier)
			case gatewayv1.HTTPRouteFilterResponseHeaderModifier:
				wc.ResponseHeaders, err = headerModifier(f.ResponseHeaderModifier)
			default:
				if out.err == nil {
					out.err = newError(string(gatewayv1.RouteConditionResolvedRefs), string(gatewayv1.RouteReasonUnsupportedValue),
						"%s: filter type %q is not supported on a backendRef (only header modifiers): its requests are answered 500; move it to the rule", field, f.Type)
				}
				wc = nil
			}
			if err != nil {
				if out.err == nil {
					out.err = &condError{Type: string(gatewayv1.RouteConditionResolvedRefs), Reason: err.Reason, Message: field + ": " + err.Message}
				}
				wc = nil
			}
			if wc == nil {
				break
			}
		}
		if wc == nil {
			out.invalidWeight += uint32(weight)
			continue
		}
		out.websocket = out.websocket || ws
		out.clusters = append(out.clusters, wc)
	}
	return out
}

// backendKey is what a backendRef of a route in namespace routeNS names, its defaults
// applied: group ("" for core), kind and namespace/name.
func backendKey(routeNS string, ref gatewayv1.BackendObjectReference) (group, kind string, key types.NamespacedName) {
	kind = "Service"
	if ref.Group != nil {
		group = coreGroup(string(*ref.Group))
	}
	if ref.Kind != nil {
		kind = string(*ref.Kind)
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return group, kind, types.NamespacedName{Namespace: ns, Name: string(ref.Name)}
}

// resolveBackend returns the cluster of one backendRef, and whether its Service port
// speaks WebSocket, or the ResolvedRefs reason it cannot be used.
func resolveBackend(p *dag.Processing, grants grantIndex, kind gatewayv1.Kind, routeNS string, ref gatewayv1.BackendObjectReference, field string) (*dag.Cluster, bool, *condError) {
	refErr := func(reason gatewayv1.RouteConditionReason, format string, args ...any) *condError {
		return newError(string(gatewayv1.RouteConditionResolvedRefs), string(reason), field+": "+format, args...)
	}
	group, refKind, key := backendKey(routeNS, ref)
	if group != "" || refKind != "Service" {
		return nil, false, refErr(gatewayv1.RouteReasonInvalidKind, "%s %q is not supported: refer to a Service", refKind, group)
	}
	if !grants.permitted(objectKind{groupName, string(kind)}, routeNS, objectKind{"", "Service"}, key.Namespace, key.Name) {
		return nil, false, refErr(gatewayv1.RouteReasonRefNotPermitted,
			"Service %s is in another namespace and no ReferenceGrant there allows %ss of namespace %s to use it; add one", key, kind, routeNS)
	}
	if ref.Port == nil {
		return nil, false, refErr(gatewayv1.RouteReasonBackendNotFound, "Service %s: port is required", key)
	}
	svc := p.Service(key)
	if svc == nil {
		return nil, false, refErr(gatewayv1.RouteReasonBackendNotFound, "Service %s not found", key)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if reason := p.ExternalNameRefused(svc); reason != "" {
			return nil, false, refErr(gatewayv1.RouteReasonBackendNotFound, "Service %s: %s", key, reason)
		}
	}
	sp, ok := findPort(svc, int32(*ref.Port))
	if !ok {
		if svc.Spec.Type != corev1.ServiceTypeExternalName {
			return nil, false, refErr(gatewayv1.RouteReasonBackendNotFound, "Service %s has no port %d", key, *ref.Port)
		}
		sp = corev1.ServicePort{Port: int32(*ref.Port)}
	}
	protocol, ws, ok := backendProtocol(kind, sp.AppProtocol)
	if !ok {
		supported := "none, http, https, " + appProtocolH2C + ", " + appProtocolWS + ", " + appProtocolWSS
		if kind == grpcRouteKind {
			supported = "none, grpc, " + appProtocolH2C
		}
		return nil, false, refErr(gatewayv1.RouteReasonUnsupportedProtocol,
			"Service %s port %d: appProtocol %q is not supported for %s backends (supported: %s)", key, sp.Port, *sp.AppProtocol, kind, supported)
	}
	return p.Cluster(svc, sp, protocol), ws, nil
}

// backendProtocol returns how the data planes speak to a Service port that routes of
// kind send to, from its appProtocol: the cluster protocol, and whether WebSocket
// upgrades are allowed. A GRPCRoute's backends speak gRPC in clear text: HTTP/2 (h2c).
// ok is false for an appProtocol the route kind cannot use.
func backendProtocol(kind gatewayv1.Kind, appProtocol *string) (protocol string, ws, ok bool) {
	ap := ""
	if appProtocol != nil {
		ap = *appProtocol
	}
	switch kind {
	case grpcRouteKind:
		switch ap {
		case "", appProtocolH2C, "grpc", "GRPC":
			return "h2c", false, true
		}
		return "", false, false
	case httpRouteKind:
		switch ap {
		case appProtocolH2C:
			return "h2c", false, true
		case appProtocolWS:
			return "", true, true
		case "", "http", "HTTP", "tcp", "TCP":
			return "", false, true
		case "https", "HTTPS", "tls", "TLS":
			// The port speaks TLS: a BackendTLSPolicy says how to verify it; without
			// one the connection is encrypted but the certificate is not checked,
			// as a clear-text connection to a TLS port could never work.
			return "tls", false, true
		case appProtocolWSS:
			return "tls", true, true
		}
		return "", false, false
	}
	return "", false, true
}

func findPort(svc *corev1.Service, port int32) (corev1.ServicePort, bool) {
	for _, sp := range svc.Spec.Ports {
		if sp.Port == port {
			return sp, true
		}
	}
	return corev1.ServicePort{}, false
}
