package gatewayapi

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// invalidationRoutes is how many routes the invalidation tests attach.
const invalidationRoutes = 12

// invalidationStore is a Gateway with one HTTP listener and invalidationRoutes
// HTTPRoutes of namespace team on it, each with a host of its own, sending to Service
// web of namespace backends, which a ReferenceGrant there opens to them.
func invalidationStore(t *testing.T) *store.Store {
	objs := testutil.DecodeObjects(t, `
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: 80, protocol: HTTP, hostname: "*.example.com", allowedRoutes: {namespaces: {from: All}}}]
---
kind: ReferenceGrant
metadata: {name: team, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: team}]
  to: [{group: "", kind: Service}]
---
kind: Service
metadata: {name: web, namespace: backends}
spec: {ports: [{name: http, port: 80}]}
---
kind: Endpoints
metadata: {name: web, namespace: backends}
subsets: [{addresses: [{ip: 10.0.0.1}], ports: [{name: http, port: 8080}]}]`)
	for i := range invalidationRoutes {
		objs = append(objs, invalidationRoute(i, "/"))
	}
	return store.FromObjects(objs)
}

func invalidationRoute(i int, path string) *gatewayv1.HTTPRoute {
	infra, backends := gatewayv1.Namespace("infra"), gatewayv1.Namespace("backends")
	port := gatewayv1.PortNumber(80)
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("r%d", i)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "gw", Namespace: &infra}}},
			Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(fmt.Sprintf("r%d.example.com", i))},
			Rules: []gatewayv1.HTTPRouteRule{{
				Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Value: &path}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
					Name: "web", Namespace: &backends, Port: &port}}}},
			}},
		},
	}
}

// routeConditions are the conditions of every HTTPRoute's parent entries, one line per
// distinct set, with how many routes have it.
func routeConditions(g *dag.Graph) []string {
	count := map[string]int{}
	for _, line := range describeStatuses(g) {
		if rest, ok := strings.CutPrefix(line, "HTTPRoute "); ok {
			_, conds, _ := strings.Cut(rest, ": ")
			count[conds]++
		}
	}
	var out []string
	for conds, n := range count {
		out = append(out, fmt.Sprintf("%d: %s", n, conds))
	}
	slices.Sort(out)
	return out
}

// incrementalStep builds s with inc, requires the full build's graph, and returns it.
func incrementalStep(t *testing.T, inc *dag.Incremental, s *store.Store, what string) *dag.Graph {
	t.Helper()
	got := inc.Build(s)
	want := dag.Build(s, dag.Options{Processors: []dag.Processor{Processor{}}})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: incremental build differs from a full build (-full +incremental):\n%s", what, diff)
	}
	return got
}

// TestIncrementalRecomputesRoutesOfAChangedContext: an edit of one route processes that
// route alone, while a change of what every route is processed against (a ReferenceGrant
// deleted, a Gateway's listener edited, a Service the routes send to) processes every
// route again, which the routes' statuses and the data plane show.
func TestIncrementalRecomputesRoutesOfAChangedContext(t *testing.T) {
	s := invalidationStore(t)
	inc := dag.NewIncremental(dag.Options{Processors: []dag.Processor{Processor{}}})
	g := incrementalStep(t, inc, s, "first build")
	resolved := fmt.Sprintf("%d: %s", invalidationRoutes, routeOK)
	checkLines(t, "routes at first", routeConditions(g), []string{resolved})

	s.Upsert(invalidationRoute(3, "/v2"))
	incrementalStep(t, inc, s, "one route edited")
	refs, all := inc.Touched()
	if why := inc.LastStats.ProcessorsFull; why != "" || all {
		t.Fatalf("one route edited: processed whole (%s)", why)
	}
	routes := slices.DeleteFunc(slices.Clone(refs), func(r dag.ObjectRef) bool { return r.Kind != dag.KindHTTPRoute })
	if want := []dag.ObjectRef{{Kind: dag.KindHTTPRoute, Namespace: "team", Name: "r3"}}; !slices.Equal(routes, want) {
		t.Fatalf("one route edited: routes touched %v, want %v", routes, want)
	}

	grant := s.ReferenceGrants[types.NamespacedName{Namespace: "backends", Name: "team"}]
	s.Delete(grant)
	g = incrementalStep(t, inc, s, "ReferenceGrant deleted")
	checkLines(t, "routes without the ReferenceGrant", routeConditions(g),
		[]string{fmt.Sprintf("%d: Accepted=True/Accepted ResolvedRefs=False/RefNotPermitted", invalidationRoutes)})
	if got := describeGateways(g); !slices.ContainsFunc(got, func(l string) bool {
		return strings.Contains(l, "r5.example.com") && strings.HasSuffix(l, "-> status 500")
	}) {
		t.Fatalf("without the ReferenceGrant, r5.example.com should answer 500:\n%s", strings.Join(got, "\n"))
	}

	s.Upsert(grant)
	g = incrementalStep(t, inc, s, "ReferenceGrant restored")
	checkLines(t, "routes with the ReferenceGrant again", routeConditions(g), []string{resolved})

	gw := s.Gateways[types.NamespacedName{Namespace: "infra", Name: "gw"}].DeepCopy()
	other := gatewayv1.Hostname("*.example.org")
	gw.Spec.Listeners[0].Hostname = &other
	s.Upsert(gw)
	g = incrementalStep(t, inc, s, "listener hostname edited")
	checkLines(t, "routes once the listener's hostname is another", routeConditions(g),
		[]string{fmt.Sprintf("%d: Accepted=False/NoMatchingListenerHostname ResolvedRefs=True/ResolvedRefs", invalidationRoutes)})
	if got := describeGateways(g); slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, "r5.example.com") }) {
		t.Fatalf("the listener no longer serves r5.example.com:\n%s", strings.Join(got, "\n"))
	}

	gw = gw.DeepCopy()
	gw.Spec.Listeners[0].Hostname = nil
	s.Upsert(gw)
	incrementalStep(t, inc, s, "listener hostname removed")
	s.Upsert(&corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "backends", Name: "web"},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.0.0.2"}}, Ports: []corev1.EndpointPort{{Name: "http", Port: 8080}}}}})
	g = incrementalStep(t, inc, s, "endpoints moved")
	refs, _ = inc.Touched()
	routes = slices.DeleteFunc(slices.Clone(refs), func(r dag.ObjectRef) bool { return r.Kind != dag.KindHTTPRoute })
	slices.SortFunc(routes, dag.CompareObjectRefs)
	if n := len(slices.Compact(routes)); n != invalidationRoutes {
		t.Fatalf("endpoints of the routes' Service moved: %d routes processed again, want %d", n, invalidationRoutes)
	}
	for _, c := range g.Clusters() {
		if c.Name == "backends/web/80" && (len(c.Endpoints) != 1 || c.Endpoints[0].Address != "10.0.0.2") {
			t.Fatalf("cluster %s has endpoints %v, want 10.0.0.2", c.Name, c.Endpoints)
		}
	}
}
