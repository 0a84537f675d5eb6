package translate

import (
	"fmt"
	"maps"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/dagtest"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestIncrementalTranslationEqualsFullWithGatewayAPI is
// TestIncrementalTranslationEqualsFull with Gateway API objects among the changes:
// the Gateways' listeners, route configurations, secrets and clusters too.
func TestIncrementalTranslationEqualsFullWithGatewayAPI(t *testing.T) {
	incrementalTranslationEqualsFull(t, 15, 60, dagtest.RunGatewayAPI, dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}})
}

// TestIncrementalTranslationEqualsFullOnRouteChanges is the property over sequences
// made mostly of route changes, which reach a few hosts of a Gateway's port: the
// port's other hosts keep their translation.
func TestIncrementalTranslationEqualsFullOnRouteChanges(t *testing.T) {
	incrementalTranslationEqualsFull(t, 20, 100, dagtest.RunGatewayAPIRoutes, dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}})
}

// TestGatewayTranslationReusesUnchanged: one HTTPRoute of many edited translates one
// virtual host of its Gateway's port again; the port's other hosts, its listener, and
// the other Gateway's listener and route configuration are the very same resources, so
// the xDS server sends nothing for them.
func TestGatewayTranslationReusesUnchanged(t *testing.T) {
	docs := `
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}`
	for _, gw := range []string{"a", "b"} {
		docs += fmt.Sprintf(`
---
kind: Gateway
metadata: {name: %s}
spec: {gatewayClassName: portico, listeners: [{name: http, port: 80, protocol: HTTP}]}`, gw)
	}
	route := func(i int, path string) string {
		return fmt.Sprintf(`
---
kind: HTTPRoute
metadata: {name: r%d}
spec:
  parentRefs: [{name: %s}]
  hostnames: [r%d.example.com]
  rules: [{matches: [{path: {value: %s}}], backendRefs: [{name: web, port: 80}]}]`, i, []string{"a", "b"}[i%2], i, path)
	}
	for i := range 20 {
		docs += route(i, "/")
	}
	s := store.FromObjects(testutil.DecodeObjects(t, docs))
	builder := dag.NewIncremental(dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}})
	tr, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := tr.Translate(builder.Build(s))
	if err != nil {
		t.Fatal(err)
	}
	s.Upsert(testutil.DecodeObjects(t, route(4, "/v2"))[0])
	second, err := tr.Translate(builder.Build(s))
	if err != nil {
		t.Fatal(err)
	}
	// r4's virtual host, and its cluster (the route's copy of it, found unchanged).
	if tr.Retranslated != 2 {
		t.Fatalf("translated %d parts again, want 2 (one virtual host, one cluster)", tr.Retranslated)
	}
	for i := range first.Listeners {
		if first.Listeners[i] != second.Listeners[i] {
			t.Fatalf("listener %s is a new object although it did not change", cache.GetResourceName(first.Listeners[i]))
		}
	}
	for i := range first.Clusters {
		if first.Clusters[i] != second.Clusters[i] {
			t.Fatalf("cluster %s is a new object although it did not change", cache.GetResourceName(first.Clusters[i]))
		}
	}
	changed := map[string]int{}
	for i := range first.Routes {
		a, b := first.Routes[i].(*routev3.RouteConfiguration), second.Routes[i].(*routev3.RouteConfiguration)
		if a == b {
			continue
		}
		for j := range a.VirtualHosts {
			if a.VirtualHosts[j] != b.VirtualHosts[j] {
				changed[a.Name+" "+a.VirtualHosts[j].Name]++
			}
		}
	}
	if want := map[string]int{GatewayListenerName(k8stypes.NamespacedName{Namespace: "default", Name: "a"}, 80) + " r4.example.com": 1}; !maps.Equal(changed, want) {
		t.Fatalf("virtual hosts made again: %v, want %v", changed, want)
	}
}
