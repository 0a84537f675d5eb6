// Package bench measures whole-pipeline costs: building the graph and translating it for
// clusters of realistic size. Run: go test -run=^$ -bench=. -benchmem ./bench/
package bench

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// cluster returns n Ingresses spread over n/10 namespaces, each with its own host, two
// paths and a Service with three endpoints: the shape of a large multi-team cluster.
func cluster(n int) *store.Store {
	var objs []k8sruntime.Object
	for i := 0; i < n; i++ {
		objs = append(objs, clusterApp(i, fmt.Sprintf("10.%d.%d.", i/250, i%250), 8080)...)
	}
	return store.FromObjects(objs)
}

// clusterApp is the i-th Ingress of cluster with its Service and the Endpoints
// <ipPrefix>1..3:port.
func clusterApp(i int, ipPrefix string, port int32) []k8sruntime.Object {
	prefix := networkingv1.PathTypePrefix
	exact := networkingv1.PathTypeExact
	ns := fmt.Sprintf("team-%d", i/10)
	name := fmt.Sprintf("app-%d", i)
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}
	objs := []k8sruntime.Object{
		&networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
				Host: clusterAppHost(i),
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
					{Path: "/", PathType: &prefix, Backend: backend},
					{Path: "/healthz", PathType: &exact, Backend: backend},
				}}},
			}}},
		},
	}
	return append(objs, serviceWithEndpoints(ns, name, port, ipPrefix+"1", ipPrefix+"2", ipPrefix+"3")...)
}

// serviceWithEndpoints is a Service with one port, "http" (80), and its Endpoints: ips
// on port.
func serviceWithEndpoints(ns, name string, port int32, ips ...string) []k8sruntime.Object {
	addrs := make([]corev1.EndpointAddress, len(ips))
	for i, ip := range ips {
		addrs[i] = corev1.EndpointAddress{IP: ip}
	}
	return []k8sruntime.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		},
		&corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Subsets:    []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "http", Port: port}}, Addresses: addrs}},
		},
	}
}

// clusterAppHost is the host of app i's Ingress in cluster.
func clusterAppHost(i int) string { return fmt.Sprintf("app-%d.team-%d.example.com", i, i/10) }

func BenchmarkBuildAndTranslate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			s := cluster(n)
			b.ReportAllocs()
			b.ResetTimer()
			loopWithCPU(b, func() {
				g := dag.Build(s, dag.Options{})
				if _, err := translate.Translate(g, translate.Options{}); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			s := cluster(n)
			b.ReportAllocs()
			loopWithCPU(b, func() { dag.Build(s, dag.Options{}) })
		})
	}
}

// loopWithCPU runs op in b's loop and reports the process's CPU time per op as well
// (cpu-ns/op: every thread's, the garbage collector's included), which tells the work
// done apart from the wall time that parallel work saves.
func loopWithCPU(b *testing.B, op func()) {
	start := processCPU()
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time (user and system) the process has used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRetainedMemory reports the heap that one built graph and its xDS resources keep
// alive, per Ingress, on top of the objects themselves.
func BenchmarkRetainedMemory(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			s := cluster(n)
			var before, after runtime.MemStats
			var keep []any
			for b.Loop() {
				runtime.GC()
				runtime.ReadMemStats(&before)
				g := dag.Build(s, dag.Options{})
				res, err := translate.Translate(g, translate.Options{})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				keep = append(keep[:0], g, res)
			}
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "retained-B/ingress")
			runtime.KeepAlive(keep)
			runtime.KeepAlive(s)
		})
	}
}

// ingressRouteCluster returns n IngressRoutes as n/5 delegation trees, the multi-team shape
// of seed 003: a root in "infra" delegates "/" to a team's site, which serves "/" and
// delegates "/api" and "/blog" to two more namespaces; each tree also has an orphaned
// vertex. The routes carry timeouts, retries, weights, a strategy and a health check.
func ingressRouteCluster(n int) *store.Store {
	var objs []k8sruntime.Object
	svc := func(ns, name string, i int) {
		objs = append(objs, serviceWithEndpoints(ns, name, 8080,
			fmt.Sprintf("10.%d.%d.1", i/250, i%250), fmt.Sprintf("10.%d.%d.2", i/250, i%250))...)
	}
	ir := func(ns, name string, spec ingressroutev1.IngressRouteSpec) {
		objs = append(objs, &ingressroutev1.IngressRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})
	}
	str := intstr.FromString
	for t := 0; t < n/5; t++ {
		team := fmt.Sprintf("team-%d", t)
		apiNS, blogNS := team+"-api", team+"-blog"
		ir("infra", team, ingressroutev1.IngressRouteSpec{
			VirtualHost: &ingressroutev1.VirtualHost{Fqdn: team + ".example.com"},
			Routes:      []ingressroutev1.Route{{Match: "/", Delegate: &ingressroutev1.Delegate{Name: "site", Namespace: team}}},
		})
		ir(team, "site", ingressroutev1.IngressRouteSpec{Routes: []ingressroutev1.Route{
			{Match: "/", Services: []ingressroutev1.Service{{Name: "web", Port: 80}}},
			{Match: "/api", Delegate: &ingressroutev1.Delegate{Name: "api", Namespace: apiNS}},
			{Match: "/blog", Delegate: &ingressroutev1.Delegate{Name: "blog", Namespace: blogNS}},
		}})
		ir(apiNS, "api", ingressroutev1.IngressRouteSpec{Strategy: "WeightedLeastRequest", Routes: []ingressroutev1.Route{{
			Match: "/api", Services: []ingressroutev1.Service{{Name: "api", Port: 80}},
			TimeoutPolicy: &ingressroutev1.TimeoutPolicy{Request: ptr(str("2s"))},
			RetryPolicy:   &ingressroutev1.RetryPolicy{Count: ptr(str("2")), OnStatusCodes: []intstr.IntOrString{str("50x")}},
		}}})
		ten, ninety := int64(10), int64(90)
		ir(blogNS, "blog", ingressroutev1.IngressRouteSpec{Routes: []ingressroutev1.Route{{
			Match: "/blog", PrefixRewrite: "/",
			Services: []ingressroutev1.Service{
				{Name: "blog", Port: 80, Weight: &ninety, HealthCheck: &ingressroutev1.HealthCheck{Path: "/healthz"}},
				{Name: "blog-canary", Port: 80, Weight: &ten},
			},
		}}})
		ir(team, "site-green", ingressroutev1.IngressRouteSpec{Routes: []ingressroutev1.Route{{Match: "/", Services: []ingressroutev1.Service{{Name: "web", Port: 80}}}}})
		svc(team, "web", 4*t)
		svc(apiNS, "api", 4*t+1)
		svc(blogNS, "blog", 4*t+2)
		svc(blogNS, "blog-canary", 4*t+3)
	}
	return store.FromObjects(objs)
}

func ptr[T any](v T) *T { return &v }

func BenchmarkBuildAndTranslateIngressRoutes(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingressroutes=%d", n), func(b *testing.B) {
			s := ingressRouteCluster(n)
			if g := dag.Build(s, dag.Options{}); len(g.HTTP) != n/5 {
				b.Fatalf("%d virtual hosts, want %d: the fixture is not what it claims", len(g.HTTP), n/5)
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
