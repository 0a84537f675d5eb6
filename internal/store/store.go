// Package store holds the current set of objects that routing depends on. Sources (the
// manifest directory, the Kubernetes informers) write into it; the dag builder reads a
// consistent view of it. It knows nothing about routing.
package store

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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
	// IngressRoutes and TLSCertificateDelegations are the contour.heptio.com/v1beta1
	// objects; they are empty when their CRDs are not installed.
	IngressRoutes             map[types.NamespacedName]*contourv1beta1.IngressRoute
	TLSCertificateDelegations map[types.NamespacedName]*contourv1beta1.TLSCertificateDelegation
	// HTTPProxies and ProjectTLSCertificateDelegations are the projectcontour.io/v1
	// objects; they are empty when their CRDs are not installed. The two kinds of
	// TLSCertificateDelegation are kept apart: one of each may share a namespace/name.
	HTTPProxies                      map[types.NamespacedName]*contourv1.HTTPProxy
	ProjectTLSCertificateDelegations map[types.NamespacedName]*contourv1.TLSCertificateDelegation
	// ExtensionServices are the projectcontour.io/v1alpha1 services the proxy calls
	// itself (external authorization); empty when their CRD is not installed.
	ExtensionServices map[types.NamespacedName]*contourv1alpha1.ExtensionService
	// The gateway.networking.k8s.io/v1 objects (Gateway API); empty when their CRDs are not
	// installed. GatewayClasses are cluster-scoped, keyed by name.
	GatewayClasses     map[string]*gatewayv1.GatewayClass
	Gateways           map[types.NamespacedName]*gatewayv1.Gateway
	ListenerSets       map[types.NamespacedName]*gatewayv1.ListenerSet
	HTTPRoutes         map[types.NamespacedName]*gatewayv1.HTTPRoute
	GRPCRoutes         map[types.NamespacedName]*gatewayv1.GRPCRoute
	TLSRoutes          map[types.NamespacedName]*gatewayv1.TLSRoute
	ReferenceGrants    map[types.NamespacedName]*gatewayv1.ReferenceGrant
	BackendTLSPolicies map[types.NamespacedName]*gatewayv1.BackendTLSPolicy
	// ConfigMaps hold the CA certificates BackendTLSPolicies refer to (the kube source
	// keeps only those a BackendTLSPolicy names).
	ConfigMaps map[types.NamespacedName]*corev1.ConfigMap
	// GatewayAPICRDs are the metadata of the CustomResourceDefinitions of the
	// gateway.networking.k8s.io group, by name (their bundle-version annotation says
	// which Gateway API release is installed). Sources upsert them as
	// PartialObjectMetadata of kind CustomResourceDefinition.
	GatewayAPICRDs map[string]*metav1.PartialObjectMetadata

	// gens say when each kind last changed (see Generations). clock is shared by a store
	// and every store cloned or copied from it, so that two of them that changed apart
	// never show the same generation.
	gens    [numKinds]uint64
	clock   *atomic.Uint64
	journal Journal
}

// Kind numbers the kinds a Store keeps, for Generations.
type Kind int

// The kinds a Store keeps.
const (
	KindIngress Kind = iota
	KindIngressClass
	KindService
	KindEndpoints
	KindSecret
	KindNamespace
	KindEndpointSlice
	KindIngressRoute
	KindTLSCertificateDelegation
	KindHTTPProxy
	KindProjectTLSCertificateDelegation
	KindGatewayClass
	KindGateway
	KindListenerSet
	KindHTTPRoute
	KindGRPCRoute
	KindTLSRoute
	KindReferenceGrant
	KindBackendTLSPolicy
	KindConfigMap
	KindGatewayAPICRD
	KindExtensionService
	numKinds
)

// Generations hold, per kind, a number that changes whenever an object of that kind is
// added, replaced or removed through Upsert or Delete, and the lineage of the store:
// stores cloned (or copied) from one another share it. Two stores of one lineage with
// the same generation for a kind hold the same objects of that kind; 0 means unknown.
// The maps must be changed through Upsert and Delete only, or the generations lie.
type Generations struct {
	Lineage *atomic.Uint64
	Kinds   [numKinds]uint64
}

// Unchanged reports whether the objects of kind k are certainly the same in stores with
// generations g and h.
func (g Generations) Unchanged(h Generations, k Kind) bool {
	return g.Lineage != nil && g.Lineage == h.Lineage && g.Kinds[k] != 0 && g.Kinds[k] == h.Kinds[k]
}

// Generations returns the generations of s.
func (s *Store) Generations() Generations { return Generations{Lineage: s.clock, Kinds: s.gens} }

// touch records a change of the object of kind k under key (an EndpointSlice's is its
// Service's).
func (s *Store) touch(k Kind, key types.NamespacedName) {
	if s.clock == nil {
		s.clock = new(atomic.Uint64)
	}
	gen := s.clock.Add(1)
	s.gens[k] = gen
	s.journal.record(Change{Gen: gen, Kind: k, Key: key})
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

		IngressRoutes:             map[types.NamespacedName]*contourv1beta1.IngressRoute{},
		TLSCertificateDelegations: map[types.NamespacedName]*contourv1beta1.TLSCertificateDelegation{},

		HTTPProxies:                      map[types.NamespacedName]*contourv1.HTTPProxy{},
		ProjectTLSCertificateDelegations: map[types.NamespacedName]*contourv1.TLSCertificateDelegation{},
		ExtensionServices:                map[types.NamespacedName]*contourv1alpha1.ExtensionService{},

		GatewayClasses:     map[string]*gatewayv1.GatewayClass{},
		Gateways:           map[types.NamespacedName]*gatewayv1.Gateway{},
		ListenerSets:       map[types.NamespacedName]*gatewayv1.ListenerSet{},
		HTTPRoutes:         map[types.NamespacedName]*gatewayv1.HTTPRoute{},
		GRPCRoutes:         map[types.NamespacedName]*gatewayv1.GRPCRoute{},
		TLSRoutes:          map[types.NamespacedName]*gatewayv1.TLSRoute{},
		ReferenceGrants:    map[types.NamespacedName]*gatewayv1.ReferenceGrant{},
		BackendTLSPolicies: map[types.NamespacedName]*gatewayv1.BackendTLSPolicy{},
		ConfigMaps:         map[types.NamespacedName]*corev1.ConfigMap{},
		GatewayAPICRDs:     map[string]*metav1.PartialObjectMetadata{},
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
		s.touch(KindIngress, key(o.Namespace, o.Name))
	case *networkingv1.IngressClass:
		s.IngressClasses[o.Name] = o
		s.touch(KindIngressClass, key("", o.Name))
	case *corev1.Service:
		s.Services[key(o.Namespace, o.Name)] = o
		s.touch(KindService, key(o.Namespace, o.Name))
	case *corev1.Endpoints:
		s.Endpoints[key(o.Namespace, o.Name)] = o
		s.touch(KindEndpoints, key(o.Namespace, o.Name))
	case *corev1.Secret:
		s.Secrets[key(o.Namespace, o.Name)] = o
		s.touch(KindSecret, key(o.Namespace, o.Name))
	case *corev1.Namespace:
		s.Namespaces[o.Name] = o
		s.touch(KindNamespace, key("", o.Name))
	case *discoveryv1.EndpointSlice:
		svc, ok := sliceService(o)
		if !ok {
			return false
		}
		if s.EndpointSlices[svc] == nil {
			s.EndpointSlices[svc] = map[string]*discoveryv1.EndpointSlice{}
		}
		s.EndpointSlices[svc][o.Name] = o
		s.touch(KindEndpointSlice, svc)
	case *contourv1beta1.IngressRoute:
		s.IngressRoutes[key(o.Namespace, o.Name)] = o
		s.touch(KindIngressRoute, key(o.Namespace, o.Name))
	case *contourv1beta1.TLSCertificateDelegation:
		s.TLSCertificateDelegations[key(o.Namespace, o.Name)] = o
		s.touch(KindTLSCertificateDelegation, key(o.Namespace, o.Name))
	case *contourv1.HTTPProxy:
		s.HTTPProxies[key(o.Namespace, o.Name)] = o
		s.touch(KindHTTPProxy, key(o.Namespace, o.Name))
	case *contourv1.TLSCertificateDelegation:
		s.ProjectTLSCertificateDelegations[key(o.Namespace, o.Name)] = o
		s.touch(KindProjectTLSCertificateDelegation, key(o.Namespace, o.Name))
	case *contourv1alpha1.ExtensionService:
		upsertNamespaced(s, KindExtensionService, s.ExtensionServices, o)
	case *gatewayv1.GatewayClass:
		s.GatewayClasses[o.Name] = o
		s.touch(KindGatewayClass, key("", o.Name))
	case *gatewayv1.Gateway:
		upsertNamespaced(s, KindGateway, s.Gateways, o)
	case *gatewayv1.ListenerSet:
		upsertNamespaced(s, KindListenerSet, s.ListenerSets, o)
	case *gatewayv1.HTTPRoute:
		upsertNamespaced(s, KindHTTPRoute, s.HTTPRoutes, o)
	case *gatewayv1.GRPCRoute:
		upsertNamespaced(s, KindGRPCRoute, s.GRPCRoutes, o)
	case *gatewayv1.TLSRoute:
		upsertNamespaced(s, KindTLSRoute, s.TLSRoutes, o)
	case *gatewayv1.ReferenceGrant:
		upsertNamespaced(s, KindReferenceGrant, s.ReferenceGrants, o)
	case *gatewayv1.BackendTLSPolicy:
		upsertNamespaced(s, KindBackendTLSPolicy, s.BackendTLSPolicies, o)
	case *corev1.ConfigMap:
		upsertNamespaced(s, KindConfigMap, s.ConfigMaps, o)
	case *metav1.PartialObjectMetadata:
		if !isGatewayAPICRD(o) {
			return false
		}
		s.GatewayAPICRDs[o.Name] = o
		s.touch(KindGatewayAPICRD, key("", o.Name))
	default:
		return false
	}
	return true
}

// isGatewayAPICRD reports whether o is the metadata of a CustomResourceDefinition of
// the Gateway API group (named <plural>.gateway.networking.k8s.io).
func isGatewayAPICRD(o *metav1.PartialObjectMetadata) bool {
	return o.Kind == "CustomResourceDefinition" && strings.HasSuffix(o.Name, "."+gatewayv1.GroupName)
}

// namespacedObject is an object keyed by namespace/name.
type namespacedObject interface {
	GetNamespace() string
	GetName() string
}

func upsertNamespaced[T namespacedObject](s *Store, k Kind, m map[types.NamespacedName]T, o T) {
	nn := key(o.GetNamespace(), o.GetName())
	m[nn] = o
	s.touch(k, nn)
}

func deleteNamespaced[T namespacedObject](s *Store, k Kind, m map[types.NamespacedName]T, o T) bool {
	nn := key(o.GetNamespace(), o.GetName())
	return s.deleted(k, nn, deleteKey(m, nn))
}

// Delete removes obj (matched by kind and key). It reports whether anything was removed.
func (s *Store) Delete(obj runtime.Object) bool {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return s.deleted(KindIngress, key(o.Namespace, o.Name), deleteKey(s.Ingresses, key(o.Namespace, o.Name)))
	case *networkingv1.IngressClass:
		return s.deleted(KindIngressClass, key("", o.Name), deleteKey(s.IngressClasses, o.Name))
	case *corev1.Service:
		return s.deleted(KindService, key(o.Namespace, o.Name), deleteKey(s.Services, key(o.Namespace, o.Name)))
	case *corev1.Endpoints:
		return s.deleted(KindEndpoints, key(o.Namespace, o.Name), deleteKey(s.Endpoints, key(o.Namespace, o.Name)))
	case *corev1.Secret:
		return s.deleted(KindSecret, key(o.Namespace, o.Name), deleteKey(s.Secrets, key(o.Namespace, o.Name)))
	case *corev1.Namespace:
		return s.deleted(KindNamespace, key("", o.Name), deleteKey(s.Namespaces, o.Name))
	case *discoveryv1.EndpointSlice:
		svc, ok := sliceService(o)
		if !ok {
			return false
		}
		removed := s.deleted(KindEndpointSlice, svc, deleteKey(s.EndpointSlices[svc], o.Name))
		if len(s.EndpointSlices[svc]) == 0 {
			delete(s.EndpointSlices, svc)
		}
		return removed
	case *contourv1beta1.IngressRoute:
		return s.deleted(KindIngressRoute, key(o.Namespace, o.Name), deleteKey(s.IngressRoutes, key(o.Namespace, o.Name)))
	case *contourv1beta1.TLSCertificateDelegation:
		return s.deleted(KindTLSCertificateDelegation, key(o.Namespace, o.Name), deleteKey(s.TLSCertificateDelegations, key(o.Namespace, o.Name)))
	case *contourv1.HTTPProxy:
		return s.deleted(KindHTTPProxy, key(o.Namespace, o.Name), deleteKey(s.HTTPProxies, key(o.Namespace, o.Name)))
	case *contourv1.TLSCertificateDelegation:
		return s.deleted(KindProjectTLSCertificateDelegation, key(o.Namespace, o.Name), deleteKey(s.ProjectTLSCertificateDelegations, key(o.Namespace, o.Name)))
	case *contourv1alpha1.ExtensionService:
		return deleteNamespaced(s, KindExtensionService, s.ExtensionServices, o)
	case *gatewayv1.GatewayClass:
		return s.deleted(KindGatewayClass, key("", o.Name), deleteKey(s.GatewayClasses, o.Name))
	case *gatewayv1.Gateway:
		return deleteNamespaced(s, KindGateway, s.Gateways, o)
	case *gatewayv1.ListenerSet:
		return deleteNamespaced(s, KindListenerSet, s.ListenerSets, o)
	case *gatewayv1.HTTPRoute:
		return deleteNamespaced(s, KindHTTPRoute, s.HTTPRoutes, o)
	case *gatewayv1.GRPCRoute:
		return deleteNamespaced(s, KindGRPCRoute, s.GRPCRoutes, o)
	case *gatewayv1.TLSRoute:
		return deleteNamespaced(s, KindTLSRoute, s.TLSRoutes, o)
	case *gatewayv1.ReferenceGrant:
		return deleteNamespaced(s, KindReferenceGrant, s.ReferenceGrants, o)
	case *gatewayv1.BackendTLSPolicy:
		return deleteNamespaced(s, KindBackendTLSPolicy, s.BackendTLSPolicies, o)
	case *corev1.ConfigMap:
		return deleteNamespaced(s, KindConfigMap, s.ConfigMaps, o)
	case *metav1.PartialObjectMetadata:
		return isGatewayAPICRD(o) && s.deleted(KindGatewayAPICRD, key("", o.Name), deleteKey(s.GatewayAPICRDs, o.Name))
	}
	return false
}

// deleted notes the removal of an object of kind k when removed is true, and returns
// removed.
func (s *Store) deleted(k Kind, key types.NamespacedName, removed bool) bool {
	if removed {
		s.touch(k, key)
	}
	return removed
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
	return sortedByKey(s.Ingresses)
}

// SortedIngressRoutes returns the IngressRoutes ordered by namespace/name, so that
// everything derived from them is deterministic.
func (s *Store) SortedIngressRoutes() []*contourv1beta1.IngressRoute {
	return sortedByKey(s.IngressRoutes)
}

// SortedHTTPProxies returns the HTTPProxies ordered by namespace/name, so that
// everything derived from them is deterministic.
func (s *Store) SortedHTTPProxies() []*contourv1.HTTPProxy {
	return sortedByKey(s.HTTPProxies)
}

// sortedByKey returns the values of m ordered by namespace, then name. Keys and values
// are sorted together, in one array, without sort.Slice's reflection: every full build
// sorts each kind of object.
func sortedByKey[V any](m map[types.NamespacedName]V) []V {
	type entry struct {
		key types.NamespacedName
		val V
	}
	entries := make([]entry, 0, len(m))
	for k, v := range m {
		entries = append(entries, entry{k, v})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.key.Namespace, b.key.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.key.Name, b.key.Name)
	})
	out := make([]V, len(entries))
	for i := range entries {
		out[i] = entries[i].val
	}
	return out
}

// ServiceSlices returns the EndpointSlices of a Service ordered by name (nil if none).
func (s *Store) ServiceSlices(svc types.NamespacedName) []*discoveryv1.EndpointSlice {
	m := s.EndpointSlices[svc]
	if len(m) == 0 {
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(m))
	for _, es := range m {
		out = append(out, es)
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
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

		IngressRoutes:             maps.Clone(s.IngressRoutes),
		TLSCertificateDelegations: maps.Clone(s.TLSCertificateDelegations),

		HTTPProxies:                      maps.Clone(s.HTTPProxies),
		ProjectTLSCertificateDelegations: maps.Clone(s.ProjectTLSCertificateDelegations),
		ExtensionServices:                maps.Clone(s.ExtensionServices),

		GatewayClasses:     maps.Clone(s.GatewayClasses),
		Gateways:           maps.Clone(s.Gateways),
		ListenerSets:       maps.Clone(s.ListenerSets),
		HTTPRoutes:         maps.Clone(s.HTTPRoutes),
		GRPCRoutes:         maps.Clone(s.GRPCRoutes),
		TLSRoutes:          maps.Clone(s.TLSRoutes),
		ReferenceGrants:    maps.Clone(s.ReferenceGrants),
		BackendTLSPolicies: maps.Clone(s.BackendTLSPolicies),
		ConfigMaps:         maps.Clone(s.ConfigMaps),
		GatewayAPICRDs:     maps.Clone(s.GatewayAPICRDs),

		gens:    s.gens,
		clock:   s.clock,
		journal: s.journal,
	}
	for k, v := range s.EndpointSlices {
		c.EndpointSlices[k] = maps.Clone(v)
	}
	return c
}

// Counts returns how many objects of each kind the store holds. The kinds are named
// as in manifests, except that projectcontour.io's TLSCertificateDelegation is
// "TLSCertificateDelegation.projectcontour.io" (kind.group, as schema.GroupKind writes
// it), the plain name being contour.heptio.com's.
func (s *Store) Counts() map[string]int {
	slices := 0
	for _, m := range s.EndpointSlices {
		slices += len(m)
	}
	return map[string]int{
		"Ingress": len(s.Ingresses), "IngressClass": len(s.IngressClasses), "Service": len(s.Services),
		"Endpoints": len(s.Endpoints), "EndpointSlice": slices, "Secret": len(s.Secrets), "Namespace": len(s.Namespaces),
		"IngressRoute": len(s.IngressRoutes), "TLSCertificateDelegation": len(s.TLSCertificateDelegations),
		"HTTPProxy": len(s.HTTPProxies), ProjectTLSCertificateDelegationKind: len(s.ProjectTLSCertificateDelegations),
		"ExtensionService": len(s.ExtensionServices),
		"GatewayClass":     len(s.GatewayClasses), "Gateway": len(s.Gateways), "ListenerSet": len(s.ListenerSets),
		"HTTPRoute": len(s.HTTPRoutes), "GRPCRoute": len(s.GRPCRoutes), "TLSRoute": len(s.TLSRoutes),
		"ReferenceGrant": len(s.ReferenceGrants), "BackendTLSPolicy": len(s.BackendTLSPolicies),
		"ConfigMap": len(s.ConfigMaps), "CustomResourceDefinition": len(s.GatewayAPICRDs),
	}
}

// ProjectTLSCertificateDelegationKind is the Counts key of projectcontour.io/v1
// TLSCertificateDelegations.
const ProjectTLSCertificateDelegationKind = "TLSCertificateDelegation.projectcontour.io"
