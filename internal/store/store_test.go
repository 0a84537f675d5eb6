package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func meta(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

func TestUpsertDeleteAndClone(t *testing.T) {
	slice := func(name, svc string) *discoveryv1.EndpointSlice {
		m := meta("a", name)
		if svc != "" {
			m.Labels = map[string]string{discoveryv1.LabelServiceName: svc}
		}
		return &discoveryv1.EndpointSlice{ObjectMeta: m}
	}
	s := FromObjects([]runtime.Object{
		&networkingv1.Ingress{ObjectMeta: meta("a", "web")},
		&networkingv1.IngressClass{ObjectMeta: meta("", "portico")},
		&corev1.Service{ObjectMeta: meta("a", "web")},
		&corev1.Secret{ObjectMeta: meta("a", "tls")},
		&corev1.Namespace{ObjectMeta: meta("", "a")},
		slice("web-1", "web"), slice("web-2", "web"),
		slice("orphan", ""),                             // no Service label: not kept
		&corev1.ConfigMap{ObjectMeta: meta("a", "cfg")}, // not a kind the store keeps
	})
	want := map[string]int{"Ingress": 1, "IngressClass": 1, "Service": 1, "Endpoints": 0, "EndpointSlice": 2, "Secret": 1, "Namespace": 1}
	if diff := cmp.Diff(want, s.Counts()); diff != "" {
		t.Fatalf("counts (-want +got):\n%s", diff)
	}
	clone := s.Clone()
	if !s.Delete(slice("web-1", "web")) || !s.Delete(&corev1.Namespace{ObjectMeta: meta("", "a")}) {
		t.Fatal("Delete reported nothing removed")
	}
	if s.Delete(&corev1.Namespace{ObjectMeta: meta("", "a")}) {
		t.Error("deleting twice reported a removal")
	}
	if got := len(s.ServiceSlices(types.NamespacedName{Namespace: "a", Name: "web"})); got != 1 {
		t.Errorf("slices after delete = %d, want 1", got)
	}
	if c := clone.Counts(); c["EndpointSlice"] != 2 || c["Namespace"] != 1 {
		t.Errorf("the clone changed with the original: %v", c)
	}
}
