package dagtest

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// RunGatewayAPI is Run with Gateway API objects among the changes (half of them):
// GatewayClasses of Portico's and another controller, Gateways with HTTP and HTTPS
// listeners on shared ports, HTTPRoutes attached across namespaces with hostnames
// from the same pool, ListenerSets, BackendTLSPolicies with their CA ConfigMaps,
// ReferenceGrants and labelled Namespaces.
func RunGatewayAPI(tb testing.TB, seeds, steps int, start func(seed uint64), check Check) {
	tb.Helper()
	runWith(tb, seeds, steps, true, start, check)
}

// RunGatewayAPIRoutes is RunGatewayAPI where, after 20 changes of Gateway API objects
// of every kind, most changes are of routes (HTTPRoutes mostly) and of the Services,
// endpoints and Secrets they use: what an incremental build processes in part. One in
// ten is of any Gateway API object still.
func RunGatewayAPIRoutes(tb testing.TB, seeds, steps int, start func(seed uint64), check Check) {
	tb.Helper()
	runMode(tb, seeds, steps, func(c *Changes) { c.gatewayAPI, c.routesMostly = true, true }, start, check)
}

// routesWarmup are the changes of RunGatewayAPIRoutes before routes come first.
const routesWarmup = 20

// routeChange is one change of RunGatewayAPIRoutes after its warm-up: a route (7 in
// 10), a Service, endpoints or Secret (2 in 10), or any Gateway API object (a
// BackendTLSPolicy in half of those, so that routes meet policies).
func (c *Changes) routeChange() (runtime.Object, error) {
	ns := pick(c, c.nss)
	meta := fmt.Sprintf("{name: %s, namespace: %s, creationTimestamp: %q}", pick(c, c.names), ns, pick(c, c.times))
	switch r := c.rng.IntN(20); {
	case r < 14:
		return c.gatewayRoute(ns, meta, 8)
	case r == 19:
		return c.backendTLSPolicy(meta)
	case r < 18:
		switch c.rng.IntN(3) {
		case 0:
			return c.service()
		case 1:
			return c.endpoints(), nil
		}
		return c.secret(), nil
	}
	return c.gatewayObject()
}

// gatewayObject is one random Gateway API object (or a Namespace, which listeners
// select routes by).
func (c *Changes) gatewayObject() (runtime.Object, error) {
	ns := pick(c, c.nss)
	name := pick(c, c.names)
	meta := fmt.Sprintf("{name: %s, namespace: %s, creationTimestamp: %q}", name, ns, pick(c, c.times))
	switch c.rng.IntN(12) {
	case 0:
		controller := pick(c, []string{"portico.dev/gateway-controller", "portico.dev/gateway-controller", "example.com/other"})
		return decode[gatewayv1.GatewayClass](fmt.Sprintf("metadata: {name: %s}\nspec: {controllerName: %s}", pick(c, []string{"portico", "portico", "other"}), controller))
	case 1, 2:
		allowed := ""
		if c.rng.IntN(3) > 0 {
			allowed = fmt.Sprintf(", allowedListeners: {namespaces: {from: %s}}", pick(c, []string{"Same", "All", "All"}))
		}
		return decode[gatewayv1.Gateway](fmt.Sprintf("metadata: %s\nspec: {gatewayClassName: %s, listeners: [%s]%s}",
			meta, pick(c, []string{"portico", "portico", "portico", "other"}), c.listeners(), allowed))
	case 10:
		parentNS := ns // mostly the ListenerSet's own namespace
		if c.rng.IntN(3) == 0 {
			parentNS = pick(c, c.nss)
		}
		return decode[gatewayv1.ListenerSet](fmt.Sprintf("metadata: %s\nspec: {parentRef: {name: %s, namespace: %s}, listeners: [%s]}",
			meta, pick(c, c.names), parentNS, c.listeners()))
	case 11:
		if c.rng.IntN(2) == 0 {
			ca := "not PEM"
			if c.rng.IntN(3) > 0 {
				ca = caPEM
			}
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": ca}}, nil
		}
		return c.backendTLSPolicy(meta)
	case 3, 4, 5, 6:
		return c.gatewayRoute(ns, meta, 4)
	case 7, 8:
		return decode[gatewayv1.ReferenceGrant](fmt.Sprintf("metadata: %s\nspec: {from: [{group: gateway.networking.k8s.io, kind: %s, namespace: %s}], to: [{group: \"\", kind: %s}]}",
			meta, pick(c, []string{"HTTPRoute", "GRPCRoute", "TLSRoute", "Gateway"}), pick(c, c.nss), pick(c, []string{"Service", "Secret"})))
	default:
		labels := map[string]string{}
		if c.rng.IntN(2) == 0 {
			labels["team"] = "a"
		}
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, nil
	}
}

// backendTLSPolicy is a random BackendTLSPolicy for a Service of its namespace.
func (c *Changes) backendTLSPolicy(meta string) (runtime.Object, error) {
	target := fmt.Sprintf("{group: \"\", kind: Service, name: %s}", pick(c, c.svcs))
	return decode[gatewayv1.BackendTLSPolicy](fmt.Sprintf("metadata: %s\nspec: {targetRefs: [%s], validation: {caCertificateRefs: [{group: \"\", kind: %s, name: %s}], hostname: backend.example.com}}",
		meta, target, pick(c, []string{"ConfigMap", "ConfigMap", "Secret"}), pick(c, []string{"ca", "cert"})))
}

// gatewayRoute is a random HTTPRoute, GRPCRoute or TLSRoute of namespace ns: one in
// kinds is a TLSRoute, one a GRPCRoute, the others HTTPRoutes.
func (c *Changes) gatewayRoute(ns, meta string, kinds int) (runtime.Object, error) {
	var hosts []string
	for range c.rng.IntN(3) {
		if h := pick(c, c.hosts); h != "" {
			hosts = append(hosts, fmt.Sprintf("%q", strings.ToLower(h)))
		}
	}
	parentNS := ns
	if c.rng.IntN(3) == 0 {
		parentNS = pick(c, c.nss)
	}
	parent := fmt.Sprintf("{name: %s, namespace: %s", pick(c, c.names), parentNS)
	if c.rng.IntN(4) == 0 {
		parent += ", kind: ListenerSet"
	}
	if c.rng.IntN(3) == 0 {
		parent += fmt.Sprintf(", sectionName: l%d", c.rng.IntN(3))
	}
	backend := fmt.Sprintf("backendRefs: [{name: %s, namespace: %s, port: 80}]", pick(c, c.svcs), pick(c, c.nss))
	switch c.rng.IntN(kinds) {
	case 0:
		return decode[gatewayv1.TLSRoute](fmt.Sprintf("metadata: %s\nspec: {parentRefs: [%s}], hostnames: [%s], rules: [{%s}]}",
			meta, parent, strings.Join(hosts, ", "), backend))
	case 1:
		method := pick(c, []string{"", "{service: a.B}", "{service: a.B, method: Get}"})
		return decode[gatewayv1.GRPCRoute](fmt.Sprintf("metadata: %s\nspec: {parentRefs: [%s}], hostnames: [%s], rules: [{matches: [{method: %s}], %s}]}",
			meta, parent, strings.Join(hosts, ", "), method, backend))
	}
	rule := fmt.Sprintf("{matches: [{path: {value: %s}}], %s}", pick(c, c.paths), backend)
	return decode[gatewayv1.HTTPRoute](fmt.Sprintf("metadata: %s\nspec: {parentRefs: [%s}], hostnames: [%s], rules: [%s]}",
		meta, parent, strings.Join(hosts, ", "), rule))
}

// listeners are one to three random listeners of a Gateway or ListenerSet.
func (c *Changes) listeners() string {
	var ls []string
	for i := range 1 + c.rng.IntN(3) {
		l := fmt.Sprintf("{name: l%d, port: %d, protocol: %s", i, pick(c, []int{80, 443, 8080}), pick(c, []string{"HTTP", "HTTPS", "HTTP", "HTTP", "TLS", "UDP"}))
		if h := pick(c, c.hosts); h != "" {
			l += fmt.Sprintf(", hostname: %q", strings.ToLower(h))
		}
		if strings.Contains(l, "protocol: TLS") {
			l += ", tls: {mode: Passthrough}"
		}
		if strings.Contains(l, "HTTPS") {
			l += fmt.Sprintf(", tls: {certificateRefs: [{name: %s}]}", pick(c, []string{"cert", "bad"}))
		}
		switch c.rng.IntN(3) {
		case 0:
			l += ", allowedRoutes: {namespaces: {from: All}}"
		case 1:
			l += ", allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}"
		}
		ls = append(ls, l+"}")
	}
	return strings.Join(ls, ", ")
}

// caPEM is a CA certificate for the BackendTLSPolicies' ConfigMaps.
var caPEM = string(testutil.SelfSigned("ca.example.com").CertPEM)

// gatewayObjects returns the Gateway API objects (with the ConfigMaps they use) and
// Namespaces of s.
func gatewayObjects(s *store.Store, out []runtime.Object) []runtime.Object {
	out = appendValues(out, s.Gateways)
	out = appendValues(out, s.ListenerSets)
	out = appendValues(out, s.BackendTLSPolicies)
	out = appendValues(out, s.ConfigMaps)
	out = appendValues(out, s.HTTPRoutes)
	out = appendValues(out, s.GRPCRoutes)
	out = appendValues(out, s.TLSRoutes)
	out = appendValues(out, s.ReferenceGrants)
	for _, gc := range s.GatewayClasses {
		out = append(out, gc)
	}
	for _, ns := range s.Namespaces {
		out = append(out, ns)
	}
	return out
}

// gatewayRoutes returns the routes of s, in an order that depends on the routes only.
func gatewayRoutes(s *store.Store) []runtime.Object {
	var out []runtime.Object
	out = appendValues(out, s.HTTPRoutes)
	out = appendValues(out, s.GRPCRoutes)
	return appendValues(out, s.TLSRoutes)
}
