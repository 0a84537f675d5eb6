package gatewayapi

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// benchRoute is HTTPRoute i of namespace ns on Gateway gw of namespace infra: a host of
// its own, two rules on a header each, to a Service of namespace backends.
func benchRoute(i int, gw, ns, variant string) *gatewayv1.HTTPRoute {
	gwNS, backendNS := gatewayv1.Namespace("infra"), gatewayv1.Namespace("backends")
	port := gatewayv1.PortNumber(80)
	rule := func(v string) gatewayv1.HTTPRouteRule {
		return gatewayv1.HTTPRouteRule{
			Matches: []gatewayv1.HTTPRouteMatch{{Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-variant", Value: v}}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
				Name: gatewayv1.ObjectName(fmt.Sprintf("web-%d", i%100)), Namespace: &backendNS, Port: &port}}}},
		}
	}
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("route-%d", i)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gatewayv1.ObjectName(gw), Namespace: &gwNS}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(fmt.Sprintf("app-%d.example.com", i))},
			Rules:           []gatewayv1.HTTPRouteRule{rule("a"), rule(variant)},
		},
	}
}

// gatewayRoutes is n HTTPRoutes in 10 namespaces on 4 Gateways, to 100 Services of
// another namespace that a ReferenceGrant opens to them.
func gatewayRoutes(b *testing.B, n int) *store.Store {
	objs := testutil.DecodeObjects(b, `
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: ReferenceGrant
metadata: {name: routes, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team-0}]
  to: [{group: "", kind: Service}]`)
	grant := objs[1].(*gatewayv1.ReferenceGrant)
	grant.Spec.From = nil
	for i := range 10 {
		grant.Spec.From = append(grant.Spec.From, gatewayv1.ReferenceGrantFrom{Group: groupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(fmt.Sprintf("team-%d", i))})
	}
	all := gatewayv1.NamespacesFromAll
	for g := range 4 {
		objs = append(objs, &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: fmt.Sprintf("gw-%d", g)},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gatewayv1.Listener{{
				Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}},
			}}}})
	}
	for i := range 100 {
		objs = append(objs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "backends", Name: fmt.Sprintf("web-%d", i)},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
	}
	for i := range n {
		objs = append(objs, benchRoute(i, fmt.Sprintf("gw-%d", i%4), fmt.Sprintf("team-%d", i%10), "b"))
	}
	return store.FromObjects(objs)
}

// BenchmarkGatewayAPIIncremental measures, at 1,000 HTTPRoutes, a full build and what
// an incremental build costs when one HTTPRoute changes: that route alone is processed
// again, and the hosts it serves built again (bench/gatewayapi_test.go measures 10,000
// with translation and publication).
// go test -bench=GatewayAPIIncremental -benchmem ./internal/dag/gatewayapi/
func BenchmarkGatewayAPIIncremental(b *testing.B) {
	const n = 1000
	opts := dag.Options{Processors: []dag.Processor{Processor{}}}
	s := gatewayRoutes(b, n)
	g := dag.Build(s, opts)
	routes := 0
	for _, gw := range g.Gateways {
		for _, vh := range gw.Ports[0].HTTP {
			routes += len(vh.Routes)
		}
	}
	if routes != 2*n {
		b.Fatalf("%d routes served, want %d", routes, 2*n)
	}
	for _, st := range g.Statuses {
		if st.Status != dag.StatusValid {
			b.Fatalf("%s: %s", st.Object, st.Description)
		}
	}
	b.Run(fmt.Sprintf("full/routes=%d", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			dag.Build(s, opts)
		}
	})
	b.Run(fmt.Sprintf("one-route-changed/routes=%d", n), func(b *testing.B) {
		inc := dag.NewIncremental(opts)
		inc.Build(s)
		variants := []string{"c", "b"}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.Upsert(benchRoute(7, "gw-3", "team-7", variants[i%2]))
			inc.Build(s)
			i++
		}
	})
}
