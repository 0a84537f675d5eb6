package testutil

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// objectKinds are the kinds DecodeObjects reads, by kind name.
var objectKinds = map[string]func() runtime.Object{
	"GatewayClass":     func() runtime.Object { return &gatewayv1.GatewayClass{} },
	"Gateway":          func() runtime.Object { return &gatewayv1.Gateway{} },
	"ListenerSet":      func() runtime.Object { return &gatewayv1.ListenerSet{} },
	"HTTPRoute":        func() runtime.Object { return &gatewayv1.HTTPRoute{} },
	"GRPCRoute":        func() runtime.Object { return &gatewayv1.GRPCRoute{} },
	"TLSRoute":         func() runtime.Object { return &gatewayv1.TLSRoute{} },
	"ReferenceGrant":   func() runtime.Object { return &gatewayv1.ReferenceGrant{} },
	"BackendTLSPolicy": func() runtime.Object { return &gatewayv1.BackendTLSPolicy{} },
	"ConfigMap":        func() runtime.Object { return &corev1.ConfigMap{} },
	"Service":          func() runtime.Object { return &corev1.Service{} },
	"Secret":           func() runtime.Object { return &corev1.Secret{} },
	"Namespace":        func() runtime.Object { return &corev1.Namespace{} },
	"Endpoints":        func() runtime.Object { return &corev1.Endpoints{} },
}

// clusterScoped kinds keep an empty namespace.
var clusterScoped = map[string]bool{"GatewayClass": true, "Namespace": true}

// DecodeObjects decodes a stream of YAML documents (separated by "---" lines) of
// Gateway API and core kinds, strictly, defaulting namespaces to "default" as the
// sources do. apiVersion may be left out.
func DecodeObjects(tb testing.TB, docs string) []runtime.Object {
	tb.Helper()
	var out []runtime.Object
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			tb.Fatalf("decoding test object: %v\n%s", err, doc)
		}
		newObj, ok := objectKinds[head.Kind]
		if !ok {
			tb.Fatalf("test object of unknown kind %q", head.Kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			tb.Fatalf("decoding test object: %v\n%s", err, doc)
		}
		if m := obj.(metav1.Object); m.GetNamespace() == "" && !clusterScoped[head.Kind] {
			m.SetNamespace("default")
		}
		out = append(out, obj)
	}
	return out
}

// TLSSecret is a kubernetes.io/tls Secret holding c.
func TLSSecret(namespace, name string, c Cert) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: c.CertPEM, corev1.TLSPrivateKeyKey: c.KeyPEM}}
}
