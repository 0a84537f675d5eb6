// Package store holds the current set of objects that routing depends on. Sources (the
// manifest directory, the Kubernetes informers) write into it; the dag builder reads a
// consistent view of it. It knows nothing about routing.
package store

import (
	"maps"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Store is the set of objects relevant to routing, keyed by namespace/name. It is not safe
// for concurrent mutation; sources serialise their writes and hand the builder a Store that
// no longer changes while a build runs.
type Store struct {
	Ingresses      map[types.NamespacedName]*networkingv1.Ingress
	IngressClasses map[string]*networkingv1.IngressClass
	Services       map[types.NamespacedName]*corev1.Service
	Endpoints      map[types.NamespacedName]*corev1.Endpoints
	Secrets        map[types.NamespacedName]*corev1.Secret
	// Namespaces are kept for the rules that depend on where an object lives (root
	// namespaces of delegation).
	Namespaces map[string]*corev1.Namespace
	// EndpointSlices are grouped by the Service they belong to (label
	// kubernetes.io/service-name), then keyed by the slice's own name.
	EndpointSlices map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
}

// New returns an empty Store.
func New() *Store {
	return &Store{
		Ingresses:      map[types.NamespacedName]*networkingv1.Ingress{},
		IngressClasses: map[string]*networkingv1.IngressClass{},
		Services:       map[types.NamespacedName]*corev1.Service{},
		Endpoints:      map[types.NamespacedName]*corev1.Endpoints{},
		Secrets:        map[types.NamespacedName]*corev1.Secret{},
		Namespaces:     map[string]*corev1.Namespace{},
		EndpointSlices: map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{},
	}
}

// FromObjects builds a Store holding objs; objects of kinds the store does not keep are
// ignored. When two objects share a key the later one wins, as a later apply would.
func FromObjects(objs []runtime.Object) *Store {
	s := New()
	for _, o := range objs {
		s.Upsert(o)
	}
	return s
}

func key(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

// Upsert adds or replaces obj. It reports whether obj is of a kind the store keeps.
func (s *Store) Upsert(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		s.Ingresses[key(o.Namespace, o.Name)] = o
	case *networkingv1.IngressClass:
		s.IngressClasses[o.Name] = o
	case *corev1.Service:
		s.Services[key(o.Namespace, o.Name)] = o
	case *corev1.Endpoints:
		s.Endpoints[key(o.Namespace, o.Name)] = o
	case *corev1.Secret:
		s.Secrets[key(o.Namespace, o.Name)] = o
	case *corev1.Namespace:
		s.Namespaces[o.Name] = o
	case *discoveryv1.EndpointSlice:
		svc, ok := sliceService(o)
		if !ok {
			return false
		}
		if s.EndpointSlices[svc] == nil {
			s.EndpointSlices[svc] = map[string]*discoveryv1.EndpointSlice{}
		}
		s.EndpointSlices[svc][o.Name] = o
	default:
		return false
	}
	return true
}

// Delete removes obj (matched by kind and key). It reports whether anything was removed.
func (s *Store) Delete(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return deleteKey(s.Ingresses, key(o.Namespace, o.Name))
	case *networkingv1.IngressClass:
		return deleteKey(s.IngressClasses, o.Name)
	case *corev1.Service:
		return deleteKey(s.Services, key(o.Namespace, o.Name))
	case *corev1.Endpoints:
		return deleteKey(s.Endpoints, key(o.Namespace, o.Name))
	case *corev1.Secret:
		return deleteKey(s.Secrets, key(o.Namespace, o.Name))
	case *corev1.Namespace:
		return deleteKey(s.Namespaces, o.Name)
	case *discoveryv1.EndpointSlice:
		svc, ok := sliceService(o)
		if !ok {
			return false
		}
		removed := deleteKey(s.EndpointSlices[svc], o.Name)
		if len(s.EndpointSlices[svc]) == 0 {
			delete(s.EndpointSlices, svc)
		}
		return removed
	}
	return false
}

func deleteKey[K comparable, V any](m map[K]V, k K) bool {
	if _, ok := m[k]; !ok {
		return false
	}
	delete(m, k)
	return true
}

func sliceService(es *discoveryv1.EndpointSlice) (types.NamespacedName, bool) {
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return types.NamespacedName{}, false
	}
	return key(es.Namespace, name), true
}

// SortedIngresses returns the Ingresses ordered by namespace/name, so that everything
// derived from them is deterministic.
func (s *Store) SortedIngresses() []*networkingv1.Ingress {
	out := make([]*networkingv1.Ingress, 0, len(s.Ingresses))
	for _, ing := range s.Ingresses {
		out = append(out, ing)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// ServiceSlices returns the EndpointSlices of a Service ordered by name.
func (s *Store) ServiceSlices(svc types.NamespacedName) []*discoveryv1.EndpointSlice {
	m := s.EndpointSlices[svc]
	out := make([]*discoveryv1.EndpointSlice, 0, len(m))
	for _, es := range m {
		out = append(out, es)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Clone returns a Store with copies of the maps, sharing the objects, so that a build can
// read it while the original keeps changing.
func (s *Store) Clone() *Store {
	c := &Store{
		Ingresses:      maps.Clone(s.Ingresses),
		IngressClasses: maps.Clone(s.IngressClasses),
		Services:       maps.Clone(s.Services),
		Endpoints:      maps.Clone(s.Endpoints),
		Secrets:        maps.Clone(s.Secrets),
		Namespaces:     maps.Clone(s.Namespaces),
		EndpointSlices: make(map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice, len(s.EndpointSlices)),
	}
	for k, v := range s.EndpointSlices {
		c.EndpointSlices[k] = maps.Clone(v)
	}
	return c
}

// Counts returns how many objects of each kind the store holds.
func (s *Store) Counts() map[string]int {
	slices := 0
	for _, m := range s.EndpointSlices {
		slices += len(m)
	}
	return map[string]int{
		"Ingress": len(s.Ingresses), "IngressClass": len(s.IngressClasses), "Service": len(s.Services),
		"Endpoints": len(s.Endpoints), "EndpointSlice": slices, "Secret": len(s.Secrets), "Namespace": len(s.Namespaces),
	}
}
