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

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
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
		slice("orphan", ""),                       // no Service label: not kept
		&corev1.Pod{ObjectMeta: meta("a", "pod")}, // not a kind the store keeps
	})
	want := map[string]int{"Ingress": 1, "IngressClass": 1, "Service": 1, "Endpoints": 0, "EndpointSlice": 2, "Secret": 1, "Namespace": 1,
		"IngressRoute": 0, "TLSCertificateDelegation": 0, "HTTPProxy": 0, "TLSCertificateDelegation.projectcontour.io": 0, "ExtensionService": 0,
		"GatewayClass": 0, "Gateway": 0, "ListenerSet": 0, "HTTPRoute": 0, "GRPCRoute": 0, "TLSRoute": 0,
		"ReferenceGrant": 0, "BackendTLSPolicy": 0, "ConfigMap": 0, "CustomResourceDefinition": 0}
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

func TestContourKinds(t *testing.T) {
	route := func(ns, name, fqdn string) *contourv1beta1.IngressRoute {
		ir := &contourv1beta1.IngressRoute{ObjectMeta: meta(ns, name)}
		if fqdn != "" {
			ir.Spec.VirtualHost = &contourv1beta1.VirtualHost{Fqdn: fqdn}
		}
		return ir
	}
	delegation := &contourv1beta1.TLSCertificateDelegation{ObjectMeta: meta("certs", "wildcard")}
	s := FromObjects([]runtime.Object{
		route("b", "root", "b.example.com"),
		route("a", "z", ""),
		route("a", "root", "a.example.com"),
		route("b", "root", "replaced.example.com"), // same key: the later one wins
		delegation,
	})
	if c := s.Counts(); c["IngressRoute"] != 3 || c["TLSCertificateDelegation"] != 1 {
		t.Fatalf("counts = %v, want 3 IngressRoutes and 1 TLSCertificateDelegation", c)
	}
	var got []string
	for _, ir := range s.SortedIngressRoutes() {
		got = append(got, ir.Namespace+"/"+ir.Name)
	}
	if diff := cmp.Diff([]string{"a/root", "a/z", "b/root"}, got); diff != "" {
		t.Errorf("SortedIngressRoutes (-want +got):\n%s", diff)
	}
	if fqdn := s.IngressRoutes[types.NamespacedName{Namespace: "b", Name: "root"}].Spec.VirtualHost.Fqdn; fqdn != "replaced.example.com" {
		t.Errorf("b/root fqdn = %q, want the later object's", fqdn)
	}
	if s.TLSCertificateDelegations[types.NamespacedName{Namespace: "certs", Name: "wildcard"}] != delegation {
		t.Error("the TLSCertificateDelegation is not stored under its namespace/name")
	}

	clone := s.Clone()
	if !s.Delete(route("a", "z", "")) || !s.Delete(delegation) {
		t.Fatal("Delete reported nothing removed")
	}
	if s.Delete(route("a", "z", "")) || s.Delete(delegation) {
		t.Error("deleting twice reported a removal")
	}
	if c := s.Counts(); c["IngressRoute"] != 2 || c["TLSCertificateDelegation"] != 0 {
		t.Errorf("counts after delete = %v", c)
	}
	if c := clone.Counts(); c["IngressRoute"] != 3 || c["TLSCertificateDelegation"] != 1 {
		t.Errorf("the clone changed with the original: %v", c)
	}
	clone.Upsert(route("c", "new", ""))
	if len(s.IngressRoutes) != 2 {
		t.Error("an upsert into the clone changed the original")
	}
	if got := New().SortedIngressRoutes(); got == nil || len(got) != 0 {
		t.Errorf("SortedIngressRoutes of an empty store = %#v, want an empty slice", got)
	}
}

func TestProjectContourKinds(t *testing.T) {
	proxy := func(ns, name, fqdn string) *contourv1.HTTPProxy {
		p := &contourv1.HTTPProxy{ObjectMeta: meta(ns, name)}
		if fqdn != "" {
			p.Spec.VirtualHost = &contourv1.VirtualHost{Fqdn: fqdn}
		}
		return p
	}
	// The two groups' delegations under one namespace/name are different objects.
	delegation := &contourv1.TLSCertificateDelegation{ObjectMeta: meta("certs", "wildcard")}
	oldDelegation := &contourv1beta1.TLSCertificateDelegation{ObjectMeta: meta("certs", "wildcard")}
	s := FromObjects([]runtime.Object{
		proxy("b", "root", "b.example.com"),
		proxy("a", "z", ""),
		proxy("a", "root", "a.example.com"),
		proxy("b", "root", "replaced.example.com"), // same key: the later one wins
		delegation, oldDelegation,
	})
	counts := func(s *Store) [3]int {
		c := s.Counts()
		return [3]int{c["HTTPProxy"], c[ProjectTLSCertificateDelegationKind], c["TLSCertificateDelegation"]}
	}
	if got := counts(s); got != [3]int{3, 1, 1} {
		t.Fatalf("HTTPProxies, projectcontour.io and contour.heptio.com delegations = %v, want 3, 1, 1", got)
	}
	var got []string
	for _, p := range s.SortedHTTPProxies() {
		got = append(got, p.Namespace+"/"+p.Name)
	}
	if diff := cmp.Diff([]string{"a/root", "a/z", "b/root"}, got); diff != "" {
		t.Errorf("SortedHTTPProxies (-want +got):\n%s", diff)
	}
	if fqdn := s.HTTPProxies[types.NamespacedName{Namespace: "b", Name: "root"}].Spec.VirtualHost.Fqdn; fqdn != "replaced.example.com" {
		t.Errorf("b/root fqdn = %q, want the later object's", fqdn)
	}
	wildcard := types.NamespacedName{Namespace: "certs", Name: "wildcard"}
	if s.ProjectTLSCertificateDelegations[wildcard] != delegation || s.TLSCertificateDelegations[wildcard] != oldDelegation {
		t.Error("each TLSCertificateDelegation is not stored under its namespace/name, in its group's map")
	}

	clone := s.Clone()
	if !s.Delete(proxy("a", "z", "")) || !s.Delete(delegation) {
		t.Fatal("Delete reported nothing removed")
	}
	if s.Delete(proxy("a", "z", "")) || s.Delete(delegation) {
		t.Error("deleting twice reported a removal")
	}
	if got := counts(s); got != [3]int{2, 0, 1} {
		t.Errorf("after delete = %v, want 2, 0, 1 (the other group's delegation stays)", got)
	}
	if got := counts(clone); got != [3]int{3, 1, 1} {
		t.Errorf("the clone changed with the original: %v", got)
	}
	clone.Upsert(proxy("c", "new", ""))
	if len(s.HTTPProxies) != 2 {
		t.Error("an upsert into the clone changed the original")
	}
	if got := New().SortedHTTPProxies(); got == nil || len(got) != 0 {
		t.Errorf("SortedHTTPProxies of an empty store = %#v, want an empty slice", got)
	}
}

// TestGenerationsTellChangedKinds checks the promise the incremental builder relies on:
// equal generations of a kind mean the same objects of that kind, even for stores
// cloned from one another that then changed apart.
func TestGenerationsTellChangedKinds(t *testing.T) {
	s := New()
	s.Upsert(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}})
	before := s.Generations()
	c := s.Clone()
	if c.Generations() != before {
		t.Fatal("a clone must have the generations of its original")
	}
	s.Upsert(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "api"}})
	c.Upsert(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "other"}})
	gs, gc := s.Generations(), c.Generations()
	if gs.Unchanged(before, KindService) || gc.Unchanged(before, KindService) {
		t.Fatal("an Upsert must change its kind's generation")
	}
	if gs.Unchanged(gc, KindService) {
		t.Fatal("two stores that changed apart show the same generation")
	}
	if !gs.Unchanged(before, KindIngress) && before.Kinds[KindIngress] != 0 {
		t.Fatal("a Service change moved the Ingress generation")
	}
	if s.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "nothing"}}) || s.Generations() != gs {
		t.Fatal("deleting nothing must change nothing")
	}
	s.Delete(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "api"}})
	if s.Generations().Unchanged(gs, KindService) {
		t.Fatal("a Delete must change its kind's generation")
	}
	// Stores made apart, even by the same calls, are never taken for one another.
	a, b := FromObjects(nil), FromObjects(nil)
	a.Upsert(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x"}})
	b.Upsert(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "y"}})
	if a.Generations().Unchanged(b.Generations(), KindService) {
		t.Fatal("two unrelated stores show the same generation")
	}
}

func TestGatewayAPIKinds(t *testing.T) {
	objs := []runtime.Object{
		&gatewayv1.GatewayClass{ObjectMeta: meta("", "portico")},
		&gatewayv1.Gateway{ObjectMeta: meta("infra", "gw")},
		&gatewayv1.ListenerSet{ObjectMeta: meta("infra", "extra")},
		&gatewayv1.HTTPRoute{ObjectMeta: meta("a", "web")},
		&gatewayv1.GRPCRoute{ObjectMeta: meta("a", "rpc")},
		&gatewayv1.TLSRoute{ObjectMeta: meta("a", "tls")},
		&gatewayv1.ReferenceGrant{ObjectMeta: meta("b", "from-a")},
		&gatewayv1.BackendTLSPolicy{ObjectMeta: meta("b", "web")},
		&corev1.ConfigMap{ObjectMeta: meta("b", "ca")},
		crd("gateways.gateway.networking.k8s.io"),
		crd("httpproxies.projectcontour.io"), // not Gateway API's: not kept
	}
	s := FromObjects(objs)
	gatewayKinds := map[string]bool{"GatewayClass": true, "Gateway": true, "ListenerSet": true, "HTTPRoute": true,
		"GRPCRoute": true, "TLSRoute": true, "ReferenceGrant": true, "BackendTLSPolicy": true, "ConfigMap": true, "CustomResourceDefinition": true}
	for kind, n := range s.Counts() {
		if want := map[bool]int{true: 1}[gatewayKinds[kind]]; n != want {
			t.Errorf("Counts()[%q] = %d, want %d", kind, n, want)
		}
	}
	before := s.Generations()
	clone := s.Clone()
	if !s.Delete(&gatewayv1.HTTPRoute{ObjectMeta: meta("a", "web")}) {
		t.Fatal("deleting the HTTPRoute reported nothing removed")
	}
	if s.Delete(&gatewayv1.HTTPRoute{ObjectMeta: meta("a", "web")}) {
		t.Error("deleting twice reported a removal")
	}
	after := s.Generations()
	if after.Unchanged(before, KindHTTPRoute) {
		t.Error("the HTTPRoute generation did not change with a delete")
	}
	if !after.Unchanged(before, KindGateway) {
		t.Error("the Gateway generation changed with an HTTPRoute delete")
	}
	if len(clone.HTTPRoutes) != 1 || len(s.HTTPRoutes) != 0 {
		t.Errorf("HTTPRoutes: clone %d, original %d; want 1 and 0", len(clone.HTTPRoutes), len(s.HTTPRoutes))
	}
	if !s.Delete(&gatewayv1.GatewayClass{ObjectMeta: meta("", "portico")}) || len(s.GatewayClasses) != 0 {
		t.Error("the GatewayClass was not removed")
	}
}

// crd is the metadata of CustomResourceDefinition name, as a metadata informer gives it.
func crd(name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"}, ObjectMeta: meta("", name)}
}
