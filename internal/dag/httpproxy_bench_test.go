package dag

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/store"
)

// benchServices adds, for tree i, a Service with two endpoints in namespace ns.
func benchServices(objs []runtime.Object, ns, name string, i int) []runtime.Object {
	return append(objs,
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		},
		&corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Subsets: []corev1.EndpointSubset{{
				Ports:     []corev1.EndpointPort{{Name: "http", Port: 8080}},
				Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.%d.%d.1", i/250, i%250)}, {IP: fmt.Sprintf("10.%d.%d.2", i/250, i%250)}},
			}},
		})
}

// httpProxyTrees is n HTTPProxy roots, each with two routes on header conditions and one
// include (on a prefix) of a child in another namespace with one route.
func httpProxyTrees(n int) *store.Store {
	var objs []runtime.Object
	for i := range n {
		ns, team := fmt.Sprintf("infra-%d", i/100), fmt.Sprintf("team-%d", i)
		header := func(v string) []contourv1.MatchCondition {
			return []contourv1.MatchCondition{{Prefix: "/"}, {Header: &contourv1.HeaderMatchCondition{Name: "x-variant", Exact: v}}}
		}
		objs = append(objs,
			&contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("root-%d", i)}, Spec: contourv1.HTTPProxySpec{
				VirtualHost: &contourv1.VirtualHost{Fqdn: fmt.Sprintf("app-%d.example.com", i)},
				Routes: []contourv1.Route{
					{Conditions: header("a"), Services: []contourv1.Service{{Name: "web", Port: 80}}},
					{Conditions: header("b"), Services: []contourv1.Service{{Name: "web", Port: 80}}},
				},
				Includes: []contourv1.Include{{Name: "site", Namespace: team, Conditions: []contourv1.MatchCondition{{Prefix: "/team"}}}},
			}},
			&contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "site"}, Spec: contourv1.HTTPProxySpec{
				Routes: []contourv1.Route{{Services: []contourv1.Service{{Name: "web", Port: 80}}}},
			}},
		)
		objs = benchServices(objs, ns, "web", 2*i)
		objs = benchServices(objs, team, "web", 2*i+1)
	}
	return store.FromObjects(objs)
}

// ingressRouteTrees is the same shape in IngressRoutes, which have no header conditions:
// two routes on prefixes and one delegation of a prefix to a child with one route.
func ingressRouteTrees(n int) *store.Store {
	var objs []runtime.Object
	for i := range n {
		ns, team := fmt.Sprintf("infra-%d", i/100), fmt.Sprintf("team-%d", i)
		objs = append(objs,
			&ingressroutev1.IngressRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("root-%d", i)}, Spec: ingressroutev1.IngressRouteSpec{
				VirtualHost: &ingressroutev1.VirtualHost{Fqdn: fmt.Sprintf("app-%d.example.com", i)},
				Routes: []ingressroutev1.Route{
					{Match: "/", Services: []ingressroutev1.Service{{Name: "web", Port: 80}}},
					{Match: "/b", Services: []ingressroutev1.Service{{Name: "web", Port: 80}}},
					{Match: "/team", Delegate: &ingressroutev1.Delegate{Name: "site", Namespace: team}},
				},
			}},
			&ingressroutev1.IngressRoute{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "site"}, Spec: ingressroutev1.IngressRouteSpec{
				Routes: []ingressroutev1.Route{{Match: "/team", Services: []ingressroutev1.Service{{Name: "web", Port: 80}}}},
			}},
		)
		objs = benchServices(objs, ns, "web", 2*i)
		objs = benchServices(objs, team, "web", 2*i+1)
	}
	return store.FromObjects(objs)
}

// BenchmarkBuildHTTPProxies builds 10,000 HTTPProxy trees, and the same number of
// IngressRoute trees of the same shape for comparison (go test -bench=BuildHTTPProxies
// -benchmem ./internal/dag/).
func BenchmarkBuildHTTPProxies(b *testing.B) {
	const n = 10000
	for _, kind := range []struct {
		name  string
		store func(int) *store.Store
	}{{"httpproxy", httpProxyTrees}, {"ingressroute", ingressRouteTrees}} {
		b.Run(fmt.Sprintf("%s=%d", kind.name, n), func(b *testing.B) {
			s := kind.store(n)
			g := Build(s, Options{})
			if len(g.HTTP) != n {
				b.Fatalf("%d virtual hosts, want %d", len(g.HTTP), n)
			}
			for _, vh := range g.HTTP {
				if len(vh.Routes) != 3 {
					b.Fatalf("%s has routes %v, want 3", vh.Name, viewProxyRoutes(vh.Routes))
				}
			}
			for _, st := range g.Statuses {
				if st.Status != StatusValid {
					b.Fatalf("%s: %s %s", st.Object, st.Status, st.Description)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				Build(s, Options{})
			}
		})
	}
}
