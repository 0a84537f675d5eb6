// Package bench measures whole-pipeline costs: building the graph and translating it for
// clusters of realistic size. Run: go test -run=^$ -bench=. -benchmem ./bench/
package bench

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// cluster returns n Ingresses spread over n/10 namespaces, each with its own host, two
// paths and a Service with three endpoints: the shape of a large multi-team cluster.
func cluster(n int) *store.Store {
	var objs []k8sruntime.Object
	prefix := networkingv1.PathTypePrefix
	exact := networkingv1.PathTypeExact
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("team-%d", i/10)
		name := fmt.Sprintf("app-%d", i)
		backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}
		objs = append(objs,
			&networkingv1.Ingress{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
					Host: fmt.Sprintf("%s.%s.example.com", name, ns),
					IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
						{Path: "/", PathType: &prefix, Backend: backend},
						{Path: "/healthz", PathType: &exact, Backend: backend},
					}}},
				}}},
			},
			&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
			},
			&corev1.Endpoints{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Subsets: []corev1.EndpointSubset{{
					Ports: []corev1.EndpointPort{{Name: "http", Port: 8080}},
					Addresses: []corev1.EndpointAddress{
						{IP: fmt.Sprintf("10.%d.%d.1", i/250, i%250)},
						{IP: fmt.Sprintf("10.%d.%d.2", i/250, i%250)},
						{IP: fmt.Sprintf("10.%d.%d.3", i/250, i%250)},
					},
				}},
			},
		)
	}
	return store.FromObjects(objs)
}

func BenchmarkBuildAndTranslate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			s := cluster(n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				g := dag.Build(s, dag.Options{})
				if _, err := translate.Translate(g, translate.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("ingresses=%d", n), func(b *testing.B) {
			s := cluster(n)
			b.ReportAllocs()
			for b.Loop() {
				dag.Build(s, dag.Options{})
			}
		})
	}
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
