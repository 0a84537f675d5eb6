package gatewayapi

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const groupName = gatewayv1.GroupName

// routeKinds are the route kinds a listener of each supported protocol accepts, all
// of them when allowedRoutes.kinds is empty. A protocol not in the table is not
// supported.
var routeKinds = map[gatewayv1.ProtocolType][]gatewayv1.Kind{
	gatewayv1.HTTPProtocolType:  {"HTTPRoute", "GRPCRoute"},
	gatewayv1.HTTPSProtocolType: {"HTTPRoute", "GRPCRoute"},
	gatewayv1.TLSProtocolType:   {"TLSRoute"},
}

// listenerCheck is the outcome of the checks of one listener that need nothing but
// the Gateway's spec (validateListeners); gateway.go adds those of its certificates.
type listenerCheck struct {
	// accepted is nil, or why the listener is not accepted (UnsupportedProtocol, a
	// conflict): it is then neither programmed nor served.
	accepted *condError
	// conflicted is nil, or the conflict (HostnameConflict, ProtocolConflict).
	conflicted *condError
	// resolvedRefs is nil, or what it refers to that cannot be used (InvalidRouteKinds,
	// or from gateway.go InvalidCertificateRef, RefNotPermitted): not programmed.
	resolvedRefs *condError
	// badCertificate says that resolvedRefs is about the certificate: the listener
	// cannot be served (a listed route kind it does not support only narrows kinds).
	badCertificate bool
	// kinds are the supported route kinds it accepts (status supportedKinds).
	kinds []gatewayv1.RouteGroupKind
}

// usable reports whether a listener is served: accepted, with a certificate when it
// needs one, and some route kind to accept.
func (c *listenerCheck) usable() bool {
	return c.accepted == nil && !c.badCertificate && len(c.kinds) > 0
}

// validateListeners checks a Gateway's listeners against each other: a listener
// whose port an earlier listener takes with another protocol, or whose port and
// hostname an earlier listener already takes (the first in list order keeps them, as
// the spec's precedence says), is in conflict and not accepted; so is one whose
// protocol is not supported. Conflicts come first: a TCP listener on an HTTP
// listener's port conflicts with it whether or not TCP is supported. A pure function
// of the spec.
func validateListeners(ls []gatewayv1.Listener) []listenerCheck {
	out := make([]listenerCheck, len(ls))
	type portUse struct {
		family string
		hosts  map[string]bool
	}
	ports := map[gatewayv1.PortNumber]*portUse{}
	for i, l := range ls {
		c := &out[i]
		c.kinds, c.resolvedRefs = listenerKinds(l)
		host := ""
		if l.Hostname != nil {
			host = strings.ToLower(string(*l.Hostname))
		}
		family := protocolFamily(l.Protocol)
		pu := ports[l.Port]
		switch {
		case pu == nil:
			ports[l.Port] = &portUse{family: family, hosts: map[string]bool{host: true}}
		case pu.family != family:
			c.conflicted = newError(string(gatewayv1.ListenerConditionConflicted), string(gatewayv1.ListenerReasonProtocolConflict),
				"port %d already carries %s on an earlier listener: listeners of one port must all be HTTP, all HTTPS/TLS, or all of one other protocol; use another port", l.Port, pu.family)
		case pu.hosts[host]:
			c.conflicted = newError(string(gatewayv1.ListenerConditionConflicted), string(gatewayv1.ListenerReasonHostnameConflict),
				"an earlier listener on port %d has the same hostname %q: give this listener another hostname or port", l.Port, host)
		default:
			pu.hosts[host] = true
		}
		if c.conflicted != nil {
			c.accepted = &condError{Type: string(gatewayv1.ListenerConditionAccepted), Reason: c.conflicted.Reason, Message: c.conflicted.Message}
			continue
		}
		c.accepted = listenerAcceptance(l, host)
	}
	return out
}

// listenerAcceptance is nil, or why a listener without conflicts is not accepted on
// its own: a protocol Portico does not serve, filters, a bad namespace selector or
// hostname.
func listenerAcceptance(l gatewayv1.Listener, host string) *condError {
	if _, ok := routeKinds[l.Protocol]; !ok {
		return newError(string(gatewayv1.ListenerConditionAccepted), string(gatewayv1.ListenerReasonUnsupportedProtocol),
			"protocol %q is not supported: use HTTP, HTTPS or TLS", l.Protocol)
	}
	if l.Filters != nil && len(l.Filters.Requests) > 0 {
		// Serving the listener without its filters would skip what they do to
		// every request.
		return newError(string(gatewayv1.ListenerConditionAccepted), string(gatewayv1.ListenerReasonUnsupportedValue),
			"filters are not supported yet: remove them, or put the filters on the routes")
	}
	if err := checkNamespaceSelector(l); err != nil {
		return err
	}
	if host != "" {
		if msg := hostnameProblem(host); msg != "" {
			return newError(string(gatewayv1.ListenerConditionAccepted), string(gatewayv1.ListenerReasonUnsupportedValue),
				"hostname %q is not a hostname: %s", *l.Hostname, msg)
		}
	}
	return nil
}

// protocolFamily groups the protocols that can share a port: HTTPS and TLS listeners
// are told apart by SNI; HTTP and any other protocol need a port of their own.
func protocolFamily(p gatewayv1.ProtocolType) string {
	switch p {
	case gatewayv1.HTTPProtocolType:
		return "HTTP"
	case gatewayv1.HTTPSProtocolType, gatewayv1.TLSProtocolType:
		return "HTTPS/TLS"
	}
	return string(p)
}

// listenerKinds returns the route kinds a listener accepts: those of allowedRoutes.kinds
// that its protocol supports, or its protocol's when none are listed. A listed kind
// the protocol does not support is an InvalidRouteKinds error.
func listenerKinds(l gatewayv1.Listener) ([]gatewayv1.RouteGroupKind, *condError) {
	supported := routeKinds[l.Protocol]
	group := gatewayv1.Group(groupName)
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		out := make([]gatewayv1.RouteGroupKind, 0, len(supported))
		for _, k := range supported {
			out = append(out, gatewayv1.RouteGroupKind{Group: &group, Kind: k})
		}
		return out, nil
	}
	var out []gatewayv1.RouteGroupKind
	var bad []string
	for _, k := range l.AllowedRoutes.Kinds {
		g := groupName
		if k.Group != nil {
			g = string(*k.Group)
		}
		if g == groupName && contains(supported, k.Kind) {
			out = append(out, gatewayv1.RouteGroupKind{Group: &group, Kind: k.Kind})
			continue
		}
		bad = append(bad, fmt.Sprintf("%s/%s", g, k.Kind))
	}
	if len(bad) > 0 {
		return out, newError(string(gatewayv1.ListenerConditionResolvedRefs), string(gatewayv1.ListenerReasonInvalidRouteKinds),
			"allowedRoutes.kinds %s cannot attach to a %s listener: it accepts %v", strings.Join(bad, ", "), l.Protocol, supported)
	}
	return out, nil
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// checkNamespaceSelector refuses allowedRoutes.namespaces from Selector without a
// selector that parses: the listener would otherwise take no route and say nothing.
func checkNamespaceSelector(l gatewayv1.Listener) *condError {
	ar := l.AllowedRoutes
	if ar == nil || ar.Namespaces == nil || ar.Namespaces.From == nil || *ar.Namespaces.From != gatewayv1.NamespacesFromSelector {
		return nil
	}
	if ar.Namespaces.Selector == nil {
		return newError(string(gatewayv1.ListenerConditionAccepted), string(gatewayv1.ListenerReasonUnsupportedValue),
			"allowedRoutes.namespaces.from is Selector but there is no selector: add one (matchLabels or matchExpressions)")
	}
	if _, err := metav1.LabelSelectorAsSelector(ar.Namespaces.Selector); err != nil {
		return newError(string(gatewayv1.ListenerConditionAccepted), string(gatewayv1.ListenerReasonUnsupportedValue),
			"allowedRoutes.namespaces.selector is not a valid label selector: %v", err)
	}
	return nil
}
