package kube

import (
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/testutil"
)

func TestTrimObjectKeepsOnlyCertificatesAndKeySets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		secret   *corev1.Secret
		keepData bool
	}{
		{"tls type", &corev1.Secret{Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}}, true},
		{"opaque with a certificate", &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"tls.crt": []byte("c")}}, true},
		{"opaque CA bundle", &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"ca.crt": []byte("c")}}, true},
		{"database password", &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("hunter2")}}, false},
		{"service account token", &corev1.Secret{Type: corev1.SecretTypeServiceAccountToken, Data: map[string][]byte{"token": []byte("t")}}, false},
		{"JSON Web Key Set", &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"jwks.json": []byte(` {"keys": [{"kty": "EC"}]}`), "password": []byte("hunter2")}}, true},
		{"JSON without keys", &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"config.json": []byte(`{"user": "a"}`)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.secret.ObjectMeta = metav1.ObjectMeta{Name: "s", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
			out, err := trimObject(tc.secret)
			if err != nil {
				t.Fatal(err)
			}
			s := out.(*corev1.Secret)
			if (len(s.Data) > 0) != tc.keepData {
				t.Errorf("data kept = %v, want %v", len(s.Data) > 0, tc.keepData)
			}
			if _, ok := s.Data["password"]; ok && s.Type != corev1.SecretTypeTLS {
				t.Errorf("a password is kept beside a key set")
			}
			if s.Name != "s" || len(s.ManagedFields) != 0 {
				t.Errorf("name %q, managed fields %v: want the name kept and managed fields dropped", s.Name, s.ManagedFields)
			}
		})
	}
}

func TestTrimObjectKeepsPorticosStatusOwnership(t *testing.T) {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply},
		{Manager: FieldManager, Subresource: "status", Operation: metav1.ManagedFieldsOperationUpdate},
		{Manager: FieldManager, Operation: metav1.ManagedFieldsOperationUpdate},
	}}}
	out, _ := trimObject(ing)
	got := out.(*networkingv1.Ingress).ManagedFields
	if len(got) != 1 || got[0].Manager != FieldManager || got[0].Subresource != "status" {
		t.Errorf("managed fields kept = %+v, want only Portico's status entry", got)
	}
}

func TestTrimObjectKeepsPorticosIngressRouteStatusOwnership(t *testing.T) {
	ir := &contourv1beta1.IngressRoute{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply},
		{Manager: FieldManager, Subresource: "status", Operation: metav1.ManagedFieldsOperationUpdate},
	}}}
	out, _ := trimObject(ir)
	got := out.(*contourv1beta1.IngressRoute).ManagedFields
	if len(got) != 1 || got[0].Manager != FieldManager || got[0].Subresource != "status" {
		t.Errorf("managed fields kept = %+v, want only Portico's status entry", got)
	}
}

// TestUndecodableIngressRouteStaysMarked: an IngressRoute the API server holds but that
// cannot be decoded stays in the store, marked, so that the graph can report it invalid;
// fixing it clears the mark.
func TestUndecodableIngressRouteStaysMarked(t *testing.T) {
	s := New(Config{})
	route := func(broken bool) *contourv1beta1.IngressRoute {
		ir := &contourv1beta1.IngressRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "r"}}
		if broken {
			ir.Annotations = map[string]string{contourclient.DecodeErrorAnnotation: `spec.routes[0].service: unknown field "prot"`}
		}
		return ir
	}
	marked := func() bool {
		ir := s.Snapshot().IngressRoutes[types.NamespacedName{Namespace: "web", Name: "r"}]
		if ir == nil {
			t.Fatal("the IngressRoute is not in the store")
		}
		_, bad := contourclient.Undecodable(ir)
		return bad
	}
	s.apply(route(true), false)
	if !marked() {
		t.Fatal("the undecodable IngressRoute lost its mark")
	}
	s.apply(route(false), false)
	if marked() {
		t.Fatal("the fixed IngressRoute is still marked")
	}
}

// TestUndecodableHTTPProxyStaysMarked: the same for an HTTPProxy, and the warning names
// it.
func TestUndecodableHTTPProxyStaysMarked(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	s := New(Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	proxy := func(broken bool) *contourv1.HTTPProxy {
		p := &contourv1.HTTPProxy{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "p"}}
		if broken {
			p.Annotations = map[string]string{contourclient.DecodeErrorAnnotation: "spec.routes.retryPolicy.retriableStatusCodes: number -1 is not an integer from 0 to 4294967295"}
		}
		return p
	}
	marked := func() bool {
		p := s.Snapshot().HTTPProxies[types.NamespacedName{Namespace: "web", Name: "p"}]
		if p == nil {
			t.Fatal("the HTTPProxy is not in the store")
		}
		_, bad := contourclient.Undecodable(p)
		return bad
	}
	s.apply(proxy(true), false)
	if !marked() {
		t.Fatal("the undecodable HTTPProxy lost its mark")
	}
	if !strings.Contains(logs.String(), "HTTPProxy cannot be read") || !strings.Contains(logs.String(), "retriableStatusCodes") {
		t.Errorf("warning = %q, want it to name the kind and the field", logs.String())
	}
	s.apply(proxy(false), false)
	if marked() {
		t.Fatal("the fixed HTTPProxy is still marked")
	}
}
