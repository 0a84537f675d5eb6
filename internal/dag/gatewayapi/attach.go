package gatewayapi

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/store"
)

// attachment is a route attached to one listener, for the hosts it serves there.
type attachment struct {
	gateway  *gatewayResult
	listener *listenerState
	hosts    []string
}

// parentGateway returns the Gateway of Portico's that a parentRef names, or nil when it
// names something else (another kind, another controller's Gateway, nothing): those
// parents get no status entry from Portico.
func parentGateway(routeNS string, pr gatewayv1.ParentReference, gateways map[types.NamespacedName]*gatewayResult) *gatewayResult {
	group, kind := groupName, "Gateway"
	if pr.Group != nil {
		group = string(*pr.Group)
	}
	if pr.Kind != nil {
		kind = string(*pr.Kind)
	}
	if group != groupName || kind != "Gateway" {
		return nil
	}
	ns := routeNS
	if pr.Namespace != nil {
		ns = string(*pr.Namespace)
	}
	return gateways[types.NamespacedName{Namespace: ns, Name: string(pr.Name)}]
}

// attach returns the listeners of g that a route of kind in namespace routeNS attaches
// to through pr, with the hosts it serves on each, or the Accepted condition's reason
// why none: NoMatchingParent (no listener has the sectionName and port), then
// NotAllowedByListeners (allowedRoutes refuses the route), then
// NoMatchingListenerHostname (no hostname in common).
func attach(s *store.Store, g *gatewayResult, pr gatewayv1.ParentReference, kind gatewayv1.Kind, routeNS string, hostnames []string) ([]attachment, *condError) {
	if g.accepted != nil {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNoMatchingParent),
			"Gateway %s is not accepted (see its status)", g.key)
	}
	var named, allowed []*listenerState
	for _, l := range g.listeners {
		if pr.SectionName != nil && string(*pr.SectionName) != string(l.spec.Name) {
			continue
		}
		if pr.Port != nil && *pr.Port != l.spec.Port {
			continue
		}
		named = append(named, l)
		if l.attachable() && acceptsKind(l, kind) && allowsNamespace(s, l, g.gw.Namespace, routeNS) {
			allowed = append(allowed, l)
		}
	}
	if len(named) == 0 {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNoMatchingParent),
			"Gateway %s has no listener%s: fix parentRefs", g.key, describeSection(pr))
	}
	if len(allowed) == 0 {
		if !slices.ContainsFunc(named, (*listenerState).attachable) {
			return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNotAllowedByListeners),
				"the listener%s of Gateway %s is not accepted (see the Gateway's listener conditions)", describeSection(pr), g.key)
		}
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNotAllowedByListeners),
			"no listener%s of Gateway %s allows %ss from namespace %s: its allowedRoutes must name the kind and the namespace", describeSection(pr), g.key, kind, routeNS)
	}
	var out []attachment
	for _, l := range allowed {
		if hosts := intersectHostnames(l.hostname, hostnames); len(hosts) > 0 {
			out = append(out, attachment{gateway: g, listener: l, hosts: hosts})
		}
	}
	if len(out) == 0 {
		return nil, newError(string(gatewayv1.RouteConditionAccepted), string(gatewayv1.RouteReasonNoMatchingListenerHostname),
			"no hostname of the route is within the hostname of a listener%s of Gateway %s: fix spec.hostnames", describeSection(pr), g.key)
	}
	return out, nil
}

func describeSection(pr gatewayv1.ParentReference) string {
	out := ""
	if pr.SectionName != nil {
		out += fmt.Sprintf(" named %q", *pr.SectionName)
	}
	if pr.Port != nil {
		out += fmt.Sprintf(" on port %d", *pr.Port)
	}
	return out
}

func acceptsKind(l *listenerState, kind gatewayv1.Kind) bool {
	for _, k := range l.check.kinds {
		if k.Kind == kind {
			return true
		}
	}
	return false
}

// allowsNamespace applies a listener's allowedRoutes.namespaces: Same (the default),
// All, None, or Selector against the labels of the route's Namespace.
func allowsNamespace(s *store.Store, l *listenerState, gatewayNS, routeNS string) bool {
	from := gatewayv1.NamespacesFromSame
	var sel *gatewayv1.RouteNamespaces
	if l.spec.AllowedRoutes != nil && l.spec.AllowedRoutes.Namespaces != nil {
		sel = l.spec.AllowedRoutes.Namespaces
		if sel.From != nil {
			from = *sel.From
		}
	}
	switch from {
	case gatewayv1.NamespacesFromAll:
		return true
	case gatewayv1.NamespacesFromSame:
		return gatewayNS == routeNS
	case gatewayv1.NamespacesFromSelector:
		if sel.Selector == nil {
			return false
		}
		selector, err := metav1LabelSelector(sel)
		if err != nil {
			return false
		}
		ns := s.Namespaces[routeNS]
		return ns != nil && selector.Matches(labels.Set(ns.Labels))
	}
	return false
}

func metav1LabelSelector(sel *gatewayv1.RouteNamespaces) (labels.Selector, error) {
	return metav1.LabelSelectorAsSelector(sel.Selector)
}
