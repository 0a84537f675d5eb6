package translate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// FuzzBuildAndTranslate feeds arbitrary hosts, paths, path types, backends and TLS
// settings through the builder and the translator. Whatever the input, the build must not
// panic, every Ingress must get a status, and translation must succeed: an Ingress the
// builder accepts must never produce a resource that fails ValidateAll.
func FuzzBuildAndTranslate(f *testing.F) {
	f.Add("foo.com", "/api", "Prefix", "web", int32(80), "", "*.foo.com", "/", "Exact", "secret")
	f.Add("", "", "ImplementationSpecific", "a", int32(0), "http", "*", "//", "Prefix", "")
	f.Add("*.a.b", "/x/../y", "Exact", "svc-1", int32(65535), "", "b.c", "/\x00", "Regex", "x")
	f.Add("FOO.com", "/%2f", "Prefix", "-bad", int32(-1), "p", "a..b", "/a b", "Exact", "")
	cert := testutil.SelfSigned("foo.com", "*.foo.com")
	f.Fuzz(func(t *testing.T, host1, path1, type1, svc string, port int32, portName, host2, path2, type2, secret string) {
		pt1, pt2 := networkingv1.PathType(type1), networkingv1.PathType(type2)
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fuzz"},
			Spec: networkingv1.IngressSpec{
				DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}},
				TLS:            []networkingv1.IngressTLS{{Hosts: []string{host1, host2}, SecretName: secret}},
				Rules: []networkingv1.IngressRule{
					{Host: host1, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
						{Path: path1, PathType: &pt1, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: portName, Number: port}}}},
					}}}},
					{Host: host2, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
						{Path: path2, PathType: &pt2, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}},
					}}}},
				},
			},
		}
		service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: port}}}}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: secret}, Data: map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM}}
		g := dag.Build(store.FromObjects([]runtime.Object{ing, service, sec}), dag.Options{})
		if len(g.Statuses) != 1 {
			t.Fatalf("want one status, got %+v", g.Statuses)
		}
		if _, err := Translate(g, Options{}); err != nil {
			t.Fatalf("accepted input produced invalid xDS: %v\nstatus: %+v", err, g.Statuses[0])
		}
	})
}
