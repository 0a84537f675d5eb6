package dag

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/store"
)

// fromYAML decodes one object written as YAML into a typed value, defaulting the
// namespace as the manifest source does.
func fromYAML[T any, PT interface {
	*T
	runtime.Object
	metav1.Object
}](t testing.TB, doc string) PT {
	t.Helper()
	var obj T
	if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil {
		t.Fatalf("decoding test object: %v\n%s", err, doc)
	}
	p := PT(&obj)
	if p.GetNamespace() == "" {
		p.SetNamespace("default")
	}
	return p
}

func ing(t testing.TB, doc string) *networkingv1.Ingress {
	return fromYAML[networkingv1.Ingress](t, doc)
}

// svc returns a ClusterIP Service with one port per "name:port" (name may be empty).
func svc(namespace, name string, ports ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, p := range ports {
		pname, num, _ := strings.Cut(p, ":")
		var n int32
		fmt.Sscan(num, &n)
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: pname, Port: n})
	}
	return s
}

// endpoints returns an Endpoints object with the given IPs on one named target port.
func endpoints(namespace, name, portName string, port int32, ips ...string) *corev1.Endpoints {
	e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	subset := corev1.EndpointSubset{Ports: []corev1.EndpointPort{{Name: portName, Port: port}}}
	for _, ip := range ips {
		subset.Addresses = append(subset.Addresses, corev1.EndpointAddress{IP: ip})
	}
	e.Subsets = []corev1.EndpointSubset{subset}
	return e
}

func slice(namespace, service, name, portName string, port int32, ready map[string]bool) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		Ports:      []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	for ip, r := range ready {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &r}})
	}
	return es
}

func tlsSecret(namespace, name string, cert, key []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
}

func build(objs ...runtime.Object) *Graph {
	return Build(store.FromObjects(objs), Options{})
}

// routeView is a compact, comparable picture of a virtual host's routes.
type routeView struct {
	Match   string // "Exact /foo" or "Prefix /foo"
	Cluster string
}

func routesOf(g *Graph, host string) []routeView {
	for _, vh := range g.HTTP {
		if vh.Name == host {
			return viewRoutes(vh)
		}
	}
	return nil
}

func viewRoutes(vh *VirtualHost) []routeView {
	var out []routeView
	for _, r := range vh.Routes {
		out = append(out, routeView{Match: r.Path.Kind.String() + " " + r.Path.Value, Cluster: r.Clusters[0].Cluster.Name})
	}
	return out
}

func statusOf(g *Graph, namespace, name string) Status {
	for _, s := range g.Statuses {
		if s.Object.Namespace == namespace && s.Object.Name == name {
			return *s
		}
	}
	return Status{}
}
