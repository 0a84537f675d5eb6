package bench

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// The delegating APIs side by side (issue 9): n roots, each with two routes of its own
// and one include (delegation) of a child in another namespace that has one route. The
// HTTPProxy routes carry header conditions, which IngressRoute cannot express; otherwise
// the two fixtures hold the same objects, Services and endpoints.

func delegationServices(objs []k8sruntime.Object, ns string, i int, names ...string) []k8sruntime.Object {
	for j, name := range names {
		objs = append(objs, serviceWithEndpoints(ns, name, 8080, fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j+1))...)
	}
	return objs
}

func httpProxyCluster(n int) *store.Store {
	var objs []k8sruntime.Object
	for i := 0; i < n; i++ {
		ns, child := fmt.Sprintf("root-%d", i/10), fmt.Sprintf("team-%d", i/10)
		name := fmt.Sprintf("app-%d", i)
		objs = append(objs,
			&contourv1.HTTPProxy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: contourv1.HTTPProxySpec{
					VirtualHost: &contourv1.VirtualHost{Fqdn: name + ".example.com"},
					Routes: []contourv1.Route{
						{
							Conditions: []contourv1.MatchCondition{{Prefix: "/"}, {Header: &contourv1.HeaderMatchCondition{Name: "x-canary", Exact: "true"}}},
							Services:   []contourv1.Service{{Name: "canary", Port: 80}},
						},
						{Services: []contourv1.Service{{Name: "web", Port: 80}}},
					},
					Includes: []contourv1.Include{{
						Name: name, Namespace: child,
						Conditions: []contourv1.MatchCondition{{Prefix: "/api"}, {Header: &contourv1.HeaderMatchCondition{Name: "x-tenant", Present: true}}},
					}},
				},
			},
			&contourv1.HTTPProxy{
				ObjectMeta: metav1.ObjectMeta{Namespace: child, Name: name},
				Spec:       contourv1.HTTPProxySpec{Routes: []contourv1.Route{{Services: []contourv1.Service{{Name: "api", Port: 80}}}}},
			},
		)
		if i%10 == 0 {
			objs = delegationServices(objs, ns, i, "web", "canary")
			objs = delegationServices(objs, child, i, "api")
		}
	}
	return store.FromObjects(objs)
}

func ingressRouteDelegationCluster(n int) *store.Store {
	var objs []k8sruntime.Object
	for i := 0; i < n; i++ {
		ns, child := fmt.Sprintf("root-%d", i/10), fmt.Sprintf("team-%d", i/10)
		name := fmt.Sprintf("app-%d", i)
		objs = append(objs,
			&ingressroutev1.IngressRoute{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: ingressroutev1.IngressRouteSpec{
					VirtualHost: &ingressroutev1.VirtualHost{Fqdn: name + ".example.com"},
					Routes: []ingressroutev1.Route{
						{Match: "/canary", Services: []ingressroutev1.Service{{Name: "canary", Port: 80}}},
						{Match: "/", Services: []ingressroutev1.Service{{Name: "web", Port: 80}}},
						{Match: "/api", Delegate: &ingressroutev1.Delegate{Name: name, Namespace: child}},
					},
				},
			},
			&ingressroutev1.IngressRoute{
				ObjectMeta: metav1.ObjectMeta{Namespace: child, Name: name},
				Spec:       ingressroutev1.IngressRouteSpec{Routes: []ingressroutev1.Route{{Match: "/api", Services: []ingressroutev1.Service{{Name: "api", Port: 80}}}}},
			},
		)
		if i%10 == 0 {
			objs = delegationServices(objs, ns, i, "web", "canary")
			objs = delegationServices(objs, child, i, "api")
		}
	}
	return store.FromObjects(objs)
}

// BenchmarkDelegatingAPIs builds and translates 10,000 roots (20,000 objects) of each
// API. Compare ns/op and B/op of the two sub-benchmarks of one run: per object, HTTPProxy
// should cost no more than IngressRoute.
func BenchmarkDelegatingAPIs(b *testing.B) {
	const n = 10000
	for _, tc := range []struct {
		kind  string
		store func(int) *store.Store
	}{{"HTTPProxy", httpProxyCluster}, {"IngressRoute", ingressRouteDelegationCluster}} {
		b.Run(fmt.Sprintf("kind=%s/roots=%d", tc.kind, n), func(b *testing.B) {
			s := tc.store(n)
			g := dag.Build(s, dag.Options{})
			if len(g.HTTP) != n {
				b.Fatalf("%d virtual hosts, want %d: the fixture is not what it claims", len(g.HTTP), n)
			}
			for _, st := range g.Statuses {
				if st.Status != dag.StatusValid {
					b.Fatalf("%s is %s: %s", st.Object, st.Status, st.Description)
				}
			}
			b.ReportAllocs()
			for b.Loop() {
				g := dag.Build(s, dag.Options{})
				if _, err := translate.Translate(g, translate.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
