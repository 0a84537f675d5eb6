package bench

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Gateway API at scale (issue 19), beside HTTPProxy in the same run. The HTTPRoute
// fixture has the shape of httpProxyCluster: route i lives in namespace team-<i/10>, has
// a host of its own and two rules with header matches, and sends to Services of another
// namespace, backends-<i/10>, which a ReferenceGrant there opens to team-<i/10>'s
// HTTPRoutes (HTTPProxy's include of another namespace). The routes are spread over four
// Gateways of namespace infra, one HTTP listener each.

const gatewayCount = 4

// gatewayAPICluster returns n HTTPRoutes on gatewayCount Gateways, with their Services,
// endpoints and ReferenceGrants.
func gatewayAPICluster(n int) *store.Store {
	all := gatewayv1.NamespacesFromAll
	objs := []k8sruntime.Object{&gatewayv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		Spec:       gatewayv1.GatewayClassSpec{ControllerName: dag.GatewayControllerName},
	}}
	for g := range gatewayCount {
		objs = append(objs, &gatewayv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: fmt.Sprintf("gw-%d", g)},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gatewayv1.Listener{{
				Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}},
			}}},
		})
	}
	for i := range n {
		objs = append(objs, httpRoute(i, "/api"))
		if i%10 == 0 {
			team, backends := fmt.Sprintf("team-%d", i/10), fmt.Sprintf("backends-%d", i/10)
			objs = append(objs, &gatewayv1.ReferenceGrant{
				ObjectMeta: metav1.ObjectMeta{Namespace: backends, Name: "from-" + team},
				Spec: gatewayv1.ReferenceGrantSpec{
					From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: gatewayv1.Namespace(team)}},
					To:   []gatewayv1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
				},
			})
			objs = delegationServices(objs, backends, i, "web", "canary")
		}
	}
	return store.FromObjects(objs)
}

// httpRoute is HTTPRoute i of gatewayAPICluster, its second rule matching apiPrefix.
func httpRoute(i int, apiPrefix string) *gatewayv1.HTTPRoute {
	gwNS, backends := gatewayv1.Namespace("infra"), gatewayv1.Namespace(fmt.Sprintf("backends-%d", i/10))
	port := gatewayv1.PortNumber(80)
	prefix := gatewayv1.PathMatchPathPrefix
	backend := func(name string) []gatewayv1.HTTPBackendRef {
		return []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: gatewayv1.ObjectName(name), Namespace: &backends, Port: &port}}}}
	}
	path := func(p string) *gatewayv1.HTTPPathMatch { return &gatewayv1.HTTPPathMatch{Type: &prefix, Value: &p} }
	return &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", i/10), Name: fmt.Sprintf("app-%d", i)},
		Spec: gatewayv1.HTTPRouteSpec{
			CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
				Name: gatewayv1.ObjectName(fmt.Sprintf("gw-%d", i%gatewayCount)), Namespace: &gwNS,
			}}},
			Hostnames: []gatewayv1.Hostname{gatewayv1.Hostname(fmt.Sprintf("app-%d.example.com", i))},
			Rules: []gatewayv1.HTTPRouteRule{
				{
					Matches:     []gatewayv1.HTTPRouteMatch{{Path: path("/"), Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-canary", Value: "true"}}}},
					BackendRefs: backend("canary"),
				},
				{
					Matches: []gatewayv1.HTTPRouteMatch{
						{Path: path(apiPrefix), Headers: []gatewayv1.HTTPHeaderMatch{{Name: "x-tenant", Value: "a"}}},
						{Path: path("/")},
					},
					BackendRefs: backend("web"),
				},
			},
		},
	}
}

// editHTTPRoute flips the API prefix of HTTPRoute i%100.
func editHTTPRoute(s *store.Store, i int) {
	k := i % 100
	key := types.NamespacedName{Namespace: fmt.Sprintf("team-%d", k/10), Name: fmt.Sprintf("app-%d", k)}
	prefix := "/v2"
	if *s.HTTPRoutes[key].Spec.Rules[1].Matches[0].Path.Value == "/v2" {
		prefix = "/api"
	}
	s.Upsert(httpRoute(k, prefix))
}

// editHTTPProxy flips the include prefix of root HTTPProxy i%100 of httpProxyCluster.
func editHTTPProxy(s *store.Store, i int) {
	k := i % 100
	key := types.NamespacedName{Namespace: fmt.Sprintf("root-%d", k/10), Name: fmt.Sprintf("app-%d", k)}
	hp := s.HTTPProxies[key].DeepCopy()
	cond := &hp.Spec.Includes[0].Conditions[0]
	if cond.Prefix == "/api" {
		cond.Prefix = "/v2"
	} else {
		cond.Prefix = "/api"
	}
	s.Upsert(hp)
}

// gatewayAPIKinds are the fixtures compared, each with 10,000 routing objects: 10,000
// HTTPRoutes (10,000 hosts), and 10,000 HTTPProxies (5,000 roots, each including one
// child of another namespace: 5,000 hosts).
var gatewayAPIKinds = []struct {
	kind  string
	store func() *store.Store
	edit  func(*store.Store, int)
	hosts func(*dag.Graph) int
}{
	{"HTTPRoute", func() *store.Store { return gatewayAPICluster(10000) }, editHTTPRoute, gatewayHosts},
	{"HTTPProxy", func() *store.Store { return httpProxyCluster(5000) }, editHTTPProxy, func(g *dag.Graph) int { return len(g.HTTP) }},
}

// gatewayHosts counts the HTTP virtual hosts of the Gateways' data planes, less the
// "*" host each listener without a hostname has.
func gatewayHosts(g *dag.Graph) int {
	n := 0
	for _, gw := range g.Gateways {
		for _, p := range gw.Ports {
			for _, vh := range p.HTTP {
				if vh.Name != "*" {
					n++
				}
			}
		}
	}
	return n
}

// checkFixture fails unless the fixture builds what it claims: want hosts, every object
// valid.
func checkFixture(b *testing.B, g *dag.Graph, hosts, want int) {
	b.Helper()
	if hosts != want {
		b.Fatalf("%d virtual hosts, want %d: the fixture is not what it claims", hosts, want)
	}
	for _, st := range g.Statuses {
		if st.Status != dag.StatusValid {
			b.Fatalf("%s is %s: %s", st.Object, st.Status, st.Description)
		}
	}
}

// gatewayAPIOptions builds with the Gateway API processor, as run and serve do.
var gatewayAPIOptions = dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}}

// BenchmarkGatewayAPIBuildAndTranslate is the cold build and translation of 10,000
// HTTPRoutes and of 10,000 HTTPProxies, in the same run: compare ns/op, B/op and
// allocs/op per object.
//
//	go test -run '^$' -bench 'GatewayAPIBuildAndTranslate' -benchmem ./bench/
func BenchmarkGatewayAPIBuildAndTranslate(b *testing.B) {
	for _, k := range gatewayAPIKinds {
		b.Run(fmt.Sprintf("kind=%s/objects=10000", k.kind), func(b *testing.B) {
			s := k.store()
			g := dag.Build(s, gatewayAPIOptions)
			checkFixture(b, g, k.hosts(g), map[string]int{"HTTPRoute": 10000, "HTTPProxy": 5000}[k.kind])
			b.ReportAllocs()
			b.ResetTimer()
			loopWithCPU(b, func() {
				if _, err := translate.Translate(dag.Build(s, gatewayAPIOptions), translate.Options{}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkGatewayAPIOneChange is one route edited among 10,000 HTTPRoutes, and among
// 10,000 HTTPProxies in the same run, through what a rebuild runs: the incremental
// builder (with the Gateway API processor, as run and serve build), the incremental
// translator and the xDS server's Publish (VersionByIdentity, as the pipeline
// publishes), as BenchmarkOneChange measures Ingresses. The HTTPRoute edit moves the
// prefix of its second rule's first match; the HTTPProxy edit the prefix of its root's
// include.
//
//	go test -run '^$' -bench 'GatewayAPIOneChange' -benchtime 300x -benchmem ./bench/
func BenchmarkGatewayAPIOneChange(b *testing.B) {
	for _, k := range gatewayAPIKinds {
		b.Run(fmt.Sprintf("kind=%s/objects=10000", k.kind), func(b *testing.B) {
			s := k.store()
			builder, tr, rebuild := newRebuilder(b, gatewayAPIOptions, true)
			g := rebuild(s)
			checkFixture(b, g, k.hosts(g), map[string]int{"HTTPRoute": 10000, "HTTPProxy": 5000}[k.kind])
			loopChanges(b, s, k.edit, rebuild, builder, tr)
		})
	}
}
