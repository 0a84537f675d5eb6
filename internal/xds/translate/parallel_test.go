package translate

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/parallel"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestParallelBuildAndTranslationEqualSequential builds and translates graphs large
// enough to be split over workers, on one core (every step in order) and on several, and
// requires the same statuses and the very same bytes, from Translate and from a first
// Incremental translation. Run with -race, it also checks that the workers share nothing
// they write.
func TestParallelBuildAndTranslationEqualSequential(t *testing.T) {
	for seed := range uint64(3) {
		s := largeStore(t, seed)
		sequential := withProcs(t, 1, s)
		if g := sequential.g; len(g.HTTP) < parallel.MinItems || len(g.HTTPS) < parallel.MinItems/2 || len(g.Clusters()) < parallel.MinItems ||
			len(g.Gateways) != 2 || len(g.Gateways[0].Ports[0].HTTP) < parallel.MinItems || len(g.Gateways[1].Ports[0].HTTPS) < parallel.MinItems {
			t.Fatalf("seed %d: %d hosts, %d secure hosts, %d clusters, %d Gateways: too few to run in parallel",
				seed, len(g.HTTP), len(g.HTTPS), len(g.Clusters()), len(g.Gateways))
		}
		for range 3 {
			par := withProcs(t, 4, s)
			if diff := cmp.Diff(sequential.g.Statuses, par.g.Statuses); diff != "" {
				t.Fatalf("seed %d: statuses differ (-sequential +parallel):\n%s", seed, diff)
			}
			if diff := differentBytes(sequential.full, par.full); diff != "" {
				t.Fatalf("seed %d: Translate's resources differ: %s", seed, diff)
			}
			if diff := differentBytes(sequential.first, par.first); diff != "" {
				t.Fatalf("seed %d: a first Incremental translation's resources differ: %s", seed, diff)
			}
			// The same objects built again are new hosts and clusters, equal to the first.
			if diff := differentBytes(par.first, par.rebuilt); diff != "" {
				t.Fatalf("seed %d: Incremental's translation of a whole rebuild differs from its first: %s", seed, diff)
			}
		}
	}
}

// pipelineResult is a graph and its translations by Translate and by a new Incremental,
// and that Incremental's translation of the same store built again.
type pipelineResult struct {
	g                    *dag.Graph
	full, first, rebuilt *Resources
}

// withProcs builds and translates s with GOMAXPROCS set to procs.
func withProcs(t *testing.T, procs int, s *store.Store) pipelineResult {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	opts := dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}}
	r := pipelineResult{g: dag.Build(s, opts)}
	var err error
	if r.full, err = Translate(r.g, Options{}); err != nil {
		t.Fatal(err)
	}
	tr, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.first, err = tr.Translate(r.g); err != nil {
		t.Fatal(err)
	}
	if r.rebuilt, err = tr.Translate(dag.Build(s, opts)); err != nil {
		t.Fatal(err)
	}
	if tr.Retranslated < len(r.g.HTTP) {
		t.Fatalf("a whole rebuild translated %d parts again, fewer than its %d hosts", tr.Retranslated, len(r.g.HTTP))
	}
	return r
}

// differentBytes describes the first resource whose deterministic encoding differs.
func differentBytes(a, b *Resources) string {
	la, lb := resourceLists(a), resourceLists(b)
	for i := range la {
		if len(la[i]) != len(lb[i]) {
			return fmt.Sprintf("list %d has %d resources, then %d", i, len(la[i]), len(lb[i]))
		}
		for j := range la[i] {
			ba, err := proto.MarshalOptions{Deterministic: true}.Marshal(la[i][j])
			if err != nil {
				return err.Error()
			}
			bb, err := proto.MarshalOptions{Deterministic: true}.Marshal(lb[i][j])
			if err != nil {
				return err.Error()
			}
			if !bytes.Equal(ba, bb) {
				return fmt.Sprintf("list %d, resource %d (%T)", i, j, la[i][j])
			}
		}
	}
	return ""
}

// largeStore holds the random objects of dagtest (every kind and feature, conflicting)
// and several hundred Ingresses of varied shapes: TLS or not, one to three paths, a
// missing Service, no endpoints or several.
func largeStore(t *testing.T, seed uint64) *store.Store {
	s := store.New()
	changes := dagtest.NewChanges(seed)
	for range 300 {
		if _, err := changes.Apply(s); err != nil {
			t.Fatal(err)
		}
	}
	cert := testutil.SelfSigned("*.example.com")
	s.Upsert(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "wildcard"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert.CertPEM, corev1.TLSPrivateKeyKey: cert.KeyPEM}})
	prefix, exact := networkingv1.PathTypePrefix, networkingv1.PathTypeExact
	for i := range 2 * parallel.MinItems {
		name, host := fmt.Sprintf("app-%d", i), fmt.Sprintf("app-%d.example.com", i)
		backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Name: "http"}}}
		paths := []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: backend}}
		for j := range i % 3 {
			paths = append(paths, networkingv1.HTTPIngressPath{Path: fmt.Sprintf("/p%d", j), PathType: &exact, Backend: backend})
		}
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
			Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}}},
		}
		if i%2 == 0 {
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{host}, SecretName: "wildcard"}}
		}
		s.Upsert(ing)
		if i%17 == 0 {
			continue // no Service: a cluster without endpoints
		}
		s.Upsert(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
		eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name},
			Subsets: []corev1.EndpointSubset{{Ports: []corev1.EndpointPort{{Name: "http", Port: 8080}}}}}
		for k := range (i + int(seed)) % 4 {
			eps.Subsets[0].Addresses = append(eps.Subsets[0].Addresses, corev1.EndpointAddress{IP: fmt.Sprintf("10.%d.%d.%d", i/250, i%250, k+1)})
		}
		s.Upsert(eps)
	}
	addGateways(s)
	return s
}

// addGateways adds two Gateways, one with an HTTP listener and one with an HTTPS
// listener per host, and an HTTPRoute per host on both, to the Services of largeStore:
// enough hosts and server names for the Gateways' translation to be split too.
func addGateways(s *store.Store) {
	all := gatewayv1.NamespacesFromAll
	allowed := &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &all}}
	s.Upsert(&gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico"}, Spec: gatewayv1.GatewayClassSpec{ControllerName: dag.GatewayControllerName}})
	plain := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "plain"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "portico",
		Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType, AllowedRoutes: allowed}}}}
	secure := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "secure"}, Spec: gatewayv1.GatewaySpec{GatewayClassName: "portico"}}
	port := gatewayv1.PortNumber(80)
	for i := range parallel.MinItems + 10 {
		host := gatewayv1.Hostname(fmt.Sprintf("gw-%d.example.com", i))
		secure.Spec.Listeners = append(secure.Spec.Listeners, gatewayv1.Listener{Name: gatewayv1.SectionName(fmt.Sprintf("https-%d", i)), Port: 443,
			Protocol: gatewayv1.HTTPSProtocolType, Hostname: &host, AllowedRoutes: allowed,
			TLS: &gatewayv1.ListenerTLSConfig{CertificateRefs: []gatewayv1.SecretObjectReference{{Name: "wildcard"}}}})
		path := fmt.Sprintf("/p%d", i%3)
		s.Upsert(&gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("route-%d", i)},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "plain"}, {Name: "secure"}}},
				Hostnames:       []gatewayv1.Hostname{host},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches:     []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Value: &path}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(fmt.Sprintf("app-%d", i)), Port: &port}}}},
				}},
			}})
	}
	s.Upsert(plain)
	s.Upsert(secure)
}

// TestPretranslatedLookupSurvivesAMiss: a host the walk asks for that was not translated
// ahead must not hide the ones after it, which would then be translated again one by one.
func TestPretranslatedLookupSurvivesAMiss(t *testing.T) {
	a, b, c, d := &dag.VirtualHost{Name: "a.test"}, &dag.VirtualHost{Name: "b.test"}, &dag.VirtualHost{Name: "c.test"}, &dag.VirtualHost{Name: "d.test"}
	p := &pretranslated{
		http:   []*dag.VirtualHost{a, c, d},
		vhosts: []*routev3.VirtualHost{{Name: "a.test"}, {Name: "c.test"}, {Name: "d.test"}},
	}
	for _, step := range []struct {
		vh   *dag.VirtualHost
		want string
	}{{a, "a.test"}, {b, ""}, {c, "c.test"}, {d, "d.test"}} {
		got := p.vhost(step.vh)
		if got.GetName() != step.want {
			t.Fatalf("vhost(%s) = %q, want %q", step.vh.Name, got.GetName(), step.want)
		}
	}
}
