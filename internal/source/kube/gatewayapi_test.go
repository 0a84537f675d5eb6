package kube

import (
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/testutil"
)

// gatewayManifests are Gateway API objects written as users write them, leaving out
// every field the CRDs default (and some in deprecated v1beta1), in namespace
// "gw-defaults".
const gatewayManifests = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gw-defaults}
spec:
  controllerName: portico.dev/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: gw-defaults}
spec:
  gatewayClassName: gw-defaults
  addresses: [{value: 192.0.2.1}]
  allowedListeners: {}
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - name: https
    port: 443
    protocol: HTTPS
    hostname: "*.example.com"
    allowedRoutes: {kinds: [{kind: HTTPRoute}]}
    tls:
      certificateRefs: [{name: wildcard}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: Gateway
metadata: {name: old, namespace: gw-defaults}
spec:
  gatewayClassName: gw-defaults
  listeners:
  - {name: http, port: 8080, protocol: HTTP, allowedRoutes: {namespaces: {}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: extra, namespace: gw-defaults}
spec:
  parentRef: {name: gw}
  listeners:
  - {name: extra, port: 8443, protocol: TLS, hostname: tls.example.com, tls: {mode: Passthrough}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: gw-defaults}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  hostnames: [app.example.com]
  rules:
  - backendRefs: [{name: web, port: 80}]
  - matches:
    - path: {value: /api}
      headers: [{name: x-team, value: blue}]
      queryParams: [{name: debug, value: "1"}]
    - method: POST
    filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: shadow, port: 80}, fraction: {numerator: 5}}
    retry: {codes: [503]}
    backendRefs: [{name: api, port: 8080, weight: 3}]
  - matches: [{path: {value: /old}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {scheme: https}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: empty, namespace: gw-defaults}
spec:
  parentRefs: [{name: gw}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: HTTPRoute
metadata: {name: old, namespace: gw-defaults}
spec:
  parentRefs: [{name: old}]
  rules:
  - matches: [{path: {type: Exact, value: /x}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: gw-defaults}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - method: {service: echo.Echo, method: Ping}
      headers: [{name: x-team, value: blue}]
    backendRefs: [{name: grpc, port: 9000}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: tls, namespace: gw-defaults}
spec:
  parentRefs: [{name: extra, kind: ListenerSet}]
  hostnames: [tls.example.com]
  rules:
  - backendRefs: [{name: tls, port: 443}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ReferenceGrant
metadata: {name: grant, namespace: gw-defaults}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: old, namespace: gw-defaults}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: apps}]
  to: [{group: "", kind: Secret, name: wildcard}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: tls, namespace: gw-defaults}
spec:
  targetRefs: [{group: "", kind: Service, name: web}]
  validation: {hostname: web.example.com, wellKnownCACertificates: System}
`

// TestManifestDefaultsAreTheAPIServers: a Gateway API manifest read by `portico run`
// has the same spec as the object the API server stores for it, the CRDs' defaults (and
// the conversion of v1beta1) included: run and serve see one object.
func TestManifestDefaultsAreTheAPIServers(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	createNamespace(t, kubetest.Clientset(t, cfg), "gw-defaults")
	objs, probs := manifest.Decode("gateway.yaml", []byte(gatewayManifests))
	if len(probs) > 0 {
		t.Fatalf("problems: %v", probs)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(gatewayManifests, "\n---\n")
	if len(docs) != len(objs) {
		t.Fatalf("%d objects decoded from %d documents", len(objs), len(docs))
	}
	for i, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yamlInto(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		gvr := schema.GroupVersionResource{Group: gatewayv1.GroupName, Version: u.GroupVersionKind().Version,
			Resource: resourceOf[u.GetKind()]}
		var res dynamic.ResourceInterface = dyn.Resource(gvr)
		if u.GetNamespace() != "" {
			res = dyn.Resource(gvr).Namespace(u.GetNamespace())
		}
		if _, err := res.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		stored := storedSpec(t, gw, objs[i])
		if diff := cmp.Diff(stored, specOf(t, objs[i])); diff != "" {
			t.Errorf("%s %s: spec as read from the manifest differs from the API server's (-server +manifest):\n%s", u.GetKind(), u.GetName(), diff)
		}
	}
}

var resourceOf = map[string]string{
	"GatewayClass": ResourceGatewayClasses, "Gateway": ResourceGateways, "ListenerSet": ResourceListenerSets,
	"HTTPRoute": ResourceHTTPRoutes, "GRPCRoute": ResourceGRPCRoutes, "TLSRoute": ResourceTLSRoutes,
	"ReferenceGrant": ResourceReferenceGrants, "BackendTLSPolicy": ResourceBackendTLSPolicies,
}

func yamlInto(doc string, into *map[string]any) error {
	js, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		return err
	}
	return json.Unmarshal(js, into)
}

// storedSpec reads back the object obj was decoded as, at v1, and returns its spec.
func storedSpec(t *testing.T, c gatewayclient.Interface, obj runtime.Object) any {
	t.Helper()
	ctx, v1 := t.Context(), c.GatewayV1()
	m := obj.(metav1.Object)
	ns, name := m.GetNamespace(), m.GetName()
	var got runtime.Object
	var err error
	switch obj.(type) {
	case *gatewayv1.GatewayClass:
		got, err = v1.GatewayClasses().Get(ctx, name, metav1.GetOptions{})
	case *gatewayv1.Gateway:
		got, err = v1.Gateways(ns).Get(ctx, name, metav1.GetOptions{})
	case *gatewayv1.ListenerSet:
		got, err = v1.ListenerSets(ns).Get(ctx, name, metav1.GetOptions{})
	case *gatewayv1.HTTPRoute:
		got, err = v1.HTTPRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	case *gatewayv1.GRPCRoute:
		got, err = v1.GRPCRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	case *gatewayv1.TLSRoute:
		got, err = v1.TLSRoutes(ns).Get(ctx, name, metav1.GetOptions{})
	case *gatewayv1.ReferenceGrant:
		got, err = v1.ReferenceGrants(ns).Get(ctx, name, metav1.GetOptions{})
	case *gatewayv1.BackendTLSPolicy:
		got, err = v1.BackendTLSPolicies(ns).Get(ctx, name, metav1.GetOptions{})
	default:
		t.Fatalf("decoded a %T", obj)
	}
	if err != nil {
		t.Fatal(err)
	}
	return specOf(t, got)
}

func specOf(t *testing.T, obj runtime.Object) any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Spec any `json:"spec"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		t.Fatal(err)
	}
	return o.Spec
}

// TestSourceWatchesGatewayAPI: with the Gateway API CRDs installed, every kind Portico
// reads reaches the store (GatewayClasses whatever the watched namespaces), and follows
// updates, status writes and deletions.
func TestSourceWatchesGatewayAPI(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallGatewayAPICRDs(t, kubetest.GatewayAPIStandard)
	c := kubetest.Clientset(t, cfg)
	gw, err := gatewayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns, elsewhere = "gw-source", "gw-source-other"
	createNamespace(t, c, ns)
	createNamespace(t, c, elsewhere)
	v1 := gw.GatewayV1()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(v1.GatewayClasses().Create(ctx, &gatewayv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "gw-source"},
		Spec: gatewayv1.GatewayClassSpec{ControllerName: "portico.dev/gateway-controller"}}, metav1.CreateOptions{}))
	gateway := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw"}, Spec: gatewayv1.GatewaySpec{
		GatewayClassName: "gw-source", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}
	must(v1.Gateways(ns).Create(ctx, gateway, metav1.CreateOptions{}))
	must(v1.Gateways(elsewhere).Create(ctx, gateway, metav1.CreateOptions{}))
	parent := []gatewayv1.ParentReference{{Name: "gw"}}
	must(v1.HTTPRoutes(ns).Create(ctx, &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: gatewayv1.HTTPRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parent}}}, metav1.CreateOptions{}))
	must(v1.GRPCRoutes(ns).Create(ctx, &gatewayv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: "grpc"},
		Spec: gatewayv1.GRPCRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parent}}}, metav1.CreateOptions{}))
	must(v1.TLSRoutes(ns).Create(ctx, &gatewayv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Name: "tls"},
		Spec: gatewayv1.TLSRouteSpec{CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: parent}, Hostnames: []gatewayv1.Hostname{"tls.example.com"},
			Rules: []gatewayv1.TLSRouteRule{{BackendRefs: []gatewayv1.BackendRef{{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "tls", Port: ptrTo(gatewayv1.PortNumber(443))}}}}}}},
		metav1.CreateOptions{}))
	must(v1.ListenerSets(ns).Create(ctx, &gatewayv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: gatewayv1.ListenerSetSpec{ParentRef: gatewayv1.ParentGatewayReference{Name: "gw"},
			Listeners: []gatewayv1.ListenerEntry{{Name: "extra", Port: 8080, Protocol: gatewayv1.HTTPProtocolType}}}}, metav1.CreateOptions{}))
	must(v1.ReferenceGrants(ns).Create(ctx, &gatewayv1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Name: "grant"},
		Spec: gatewayv1.ReferenceGrantSpec{From: []gatewayv1.ReferenceGrantFrom{{Group: gatewayv1.GroupName, Kind: "HTTPRoute", Namespace: "apps"}},
			To: []gatewayv1.ReferenceGrantTo{{Kind: "Service"}}}}, metav1.CreateOptions{}))
	must(v1.BackendTLSPolicies(ns).Create(ctx, &gatewayv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tls"},
		Spec: gatewayv1.BackendTLSPolicySpec{
			TargetRefs: []gatewayv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gatewayv1.LocalPolicyTargetReference{Kind: "Service", Name: "web"}}},
			Validation: gatewayv1.BackendTLSPolicyValidation{Hostname: "web.example.com", WellKnownCACertificates: ptrTo(gatewayv1.WellKnownCACertificatesSystem)},
		}}, metav1.CreateOptions{}))
	must(c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data: map[string]string{"ca.crt": "PEM", "settings.json": "{}"}}, metav1.CreateOptions{}))

	logs := &testutil.SyncBuffer{}
	src := runSource(t, Config{Client: c, Gateway: gw, Namespaces: []string{ns},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	snap := src.Snapshot()
	counts := map[string]int{"Gateway": len(snap.Gateways), "ListenerSet": len(snap.ListenerSets),
		"HTTPRoute": len(snap.HTTPRoutes), "GRPCRoute": len(snap.GRPCRoutes), "TLSRoute": len(snap.TLSRoutes),
		"ReferenceGrant": len(snap.ReferenceGrants), "BackendTLSPolicy": len(snap.BackendTLSPolicies)}
	for kind, n := range counts {
		if n != 1 {
			t.Errorf("%d %ss in the store after sync, want 1 (the watched namespace's)", n, kind)
		}
	}
	if snap.Gateways[key(ns, "gw")] == nil || snap.GatewayClasses["gw-source"] == nil {
		t.Fatalf("after sync: Gateways %v, GatewayClass gw-source %v (cluster-scoped: watched whatever the namespaces)", keys(snap.Gateways), snap.GatewayClasses["gw-source"])
	}
	// ConfigMaps are watched for the CA certificates of BackendTLSPolicies, and only
	// that key is kept.
	if cm := snap.ConfigMaps[key(ns, "ca")]; cm == nil || !maps.Equal(cm.Data, map[string]string{"ca.crt": "PEM"}) || cm.BinaryData != nil {
		t.Errorf("ConfigMap ca in the store: %v, want its ca.crt alone", cm)
	}
	if strings.Contains(logs.String(), "Gateway API") {
		t.Errorf("warned about the Gateway API although its CRDs are installed:\n%s", logs.String())
	}

	cur, err := v1.Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Listeners[0].Hostname = ptrTo(gatewayv1.Hostname("app.example.com"))
	must(v1.Gateways(ns).Update(ctx, cur, metav1.UpdateOptions{}))
	eventually(t, 10*time.Second, "the Gateway's new hostname in the store", func() bool {
		h := src.Snapshot().Gateways[key(ns, "gw")].Spec.Listeners[0].Hostname
		return h != nil && *h == "app.example.com"
	})
	route, err := v1.HTTPRoutes(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	route.Status.Parents = []gatewayv1.RouteParentStatus{{ParentRef: parent[0], ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now()}}}}
	must(v1.HTTPRoutes(ns).UpdateStatus(ctx, route, metav1.UpdateOptions{}))
	eventually(t, 10*time.Second, "the route's status in the store", func() bool {
		return len(src.Snapshot().HTTPRoutes[key(ns, "web")].Status.Parents) == 1
	})
	if err := v1.GatewayClasses().Delete(ctx, "gw-source", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := v1.HTTPRoutes(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "deletions to reach the store", func() bool {
		s := src.Snapshot()
		return s.GatewayClasses["gw-source"] == nil && len(s.HTTPRoutes) == 0
	})
}

func ptrTo[T any](v T) *T { return &v }
