package app

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
)

func slice(service string, port int32) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s1", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		Ports:      []discoveryv1.EndpointPort{{Port: &port}},
	}
}

// The store that applyChanges keeps up to date holds what a store built from scratch
// would, including an EndpointSlice moved to another Service by its label.
func TestApplyChanges(t *testing.T) {
	s := store.New()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}
	first, moved := slice("a", 1), slice("b", 1)
	applyChanges(s, []manifest.Change{{New: svc}, {New: first}})
	if s.Services[types.NamespacedName{Namespace: "default", Name: "a"}] != svc || len(s.ServiceSlices(types.NamespacedName{Namespace: "default", Name: "a"})) != 1 {
		t.Fatalf("added objects missing: %v", s.Counts())
	}

	applyChanges(s, []manifest.Change{{Old: first, New: moved}})
	if got := s.ServiceSlices(types.NamespacedName{Namespace: "default", Name: "a"}); len(got) != 0 {
		t.Errorf("the slice is still filed under its old Service: %v", got)
	}
	if got := s.ServiceSlices(types.NamespacedName{Namespace: "default", Name: "b"}); len(got) != 1 || got[0] != moved {
		t.Errorf("the slice is not filed under its new Service: %v", got)
	}

	updated := slice("b", 2)
	applyChanges(s, []manifest.Change{{Old: moved, New: updated}, {Old: svc}})
	if got := s.ServiceSlices(types.NamespacedName{Namespace: "default", Name: "b"}); len(got) != 1 || got[0] != updated {
		t.Errorf("the slice was not updated: %v", got)
	}
	if len(s.Services) != 0 {
		t.Errorf("the removed Service is still there: %v", s.Services)
	}
}
