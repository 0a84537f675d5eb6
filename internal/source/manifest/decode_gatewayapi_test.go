package manifest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func ptrOf[T any](v T) *T { return &v }

// Gateway API manifests are read at v1 with the CRDs' defaults, v1beta1 converted; the
// API server's own agreement with these defaults is tested against a real one in
// internal/source/kube (TestManifestDefaultsAreTheAPIServers).
func TestDecodeGatewayAPI(t *testing.T) {
	const input = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico, namespace: ignored}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: portico
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw, namespace: infra}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`
	objs, probs := Decode("gw.yaml", []byte(input))
	if len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	gk := gatewayv1.Group(gatewayv1.GroupName)
	gwKind, svcKind, core := gatewayv1.Kind("Gateway"), gatewayv1.Kind("Service"), gatewayv1.Group("")
	prefix := gatewayv1.PathMatchPathPrefix
	same := gatewayv1.NamespacesFromSame
	want := []runtime.Object{
		&gatewayv1.GatewayClass{TypeMeta: tm("gateway.networking.k8s.io/v1", "GatewayClass"), ObjectMeta: om("", "portico"),
			Spec: gatewayv1.GatewayClassSpec{ControllerName: "portico.dev/gateway-controller"}},
		&gatewayv1.Gateway{TypeMeta: tm("gateway.networking.k8s.io/v1", "Gateway"), ObjectMeta: om("infra", "gw"),
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gatewayv1.Listener{{
				Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType,
				AllowedRoutes: &gatewayv1.AllowedRoutes{Namespaces: &gatewayv1.RouteNamespaces{From: &same}},
			}}}},
		&gatewayv1.HTTPRoute{TypeMeta: tm("gateway.networking.k8s.io/v1", "HTTPRoute"), ObjectMeta: om("default", "web"),
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{
					Group: &gk, Kind: &gwKind, Namespace: ptrOf(gatewayv1.Namespace("infra")), Name: "gw"}}},
				Rules: []gatewayv1.HTTPRouteRule{{
					Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: &prefix, Value: ptrOf("/")}}},
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
						BackendObjectReference: gatewayv1.BackendObjectReference{Group: &core, Kind: &svcKind, Name: "web", Port: ptrOf(gatewayv1.PortNumber(80))},
						Weight:                 ptrOf(int32(1)),
					}}},
				}},
			}},
	}
	if diff := cmp.Diff(want, objs); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}

func TestDecodeGatewayAPIProblems(t *testing.T) {
	tests := []struct {
		name, doc string
		line      int
		reason    string
	}{
		{"misspelt field", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\nspec:\n  rules:\n  - matchs: []\n",
			6, `unknown field "spec.rules[0].matchs"`},
		{"port as a string", "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec:\n  gatewayClassName: c\n  listeners:\n  - {name: h, protocol: HTTP,\n     port: \"80\"}\n",
			8, `field "spec.listeners[0].port" must be an integer, not a string`},
		{"TLSRoute of an older version", "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TLSRoute\nmetadata: {name: r}\n",
			1, "Portico does not read gateway.networking.k8s.io/v1alpha2 TLSRoute; TLSRoute is gateway.networking.k8s.io/v1 (change apiVersion)"},
		{"TCPRoute", "apiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {name: r}\n",
			2, "gateway.networking.k8s.io/v1 TCPRoute is not supported by Portico yet, so this document is ignored; Portico serves HTTPRoute, GRPCRoute and TLSRoute (TLS passthrough or termination to a TCP backend)"},
		{"misspelt kind", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoutes\nmetadata: {name: r}\n",
			2, `unknown kind "HTTPRoutes" in gateway.networking.k8s.io/v1; did you mean "HTTPRoute"?`},
		{"unknown kind", "apiVersion: gateway.networking.k8s.io/v1\nkind: Mesh\nmetadata: {name: r}\n",
			2, `unknown kind "Mesh" in gateway.networking.k8s.io/v1; the kinds Portico reads from gateway.networking.k8s.io are BackendTLSPolicy, GRPCRoute, Gateway, GatewayClass, HTTPRoute, ListenerSet, ReferenceGrant and TLSRoute`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, probs := Decode("m.yaml", []byte(tc.doc))
			if len(objs) != 0 {
				t.Errorf("objects: %v", names(objs))
			}
			want := []Problem{{File: "m.yaml", Line: tc.line, Document: 1, Reason: tc.reason}}
			if diff := cmp.Diff(want, probs); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
