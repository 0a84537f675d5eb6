package translate

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/dag/gatewayapi"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// gatewayGraph builds a Gateway with an HTTP listener on 80 (any host, and
// *.example.com), an HTTPS listener on 443 for secure.example.com and one without a
// hostname, each with a route.
func gatewayGraph(t *testing.T) *dag.Graph {
	t.Helper()
	return buildWithWeb(t, `
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: wild, protocol: HTTP, port: 80, hostname: "*.example.com"}
  - {name: https, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: cert}]}}
  - {name: any, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: cert}]}}
---
kind: HTTPRoute
metadata: {name: web, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [a.b.example.com]
  rules: [{matches: [{path: {type: Exact, value: /x}}], backendRefs: [{name: web, port: 80}]}]`, "secure.example.com")
}

// buildWithWeb builds the objects of docs and more with the Gateway API processor,
// adding Portico's GatewayClass portico, the Service web (port 80) and the TLS Secret
// cert, whose certificate is for name.
func buildWithWeb(t *testing.T, docs, name string, more ...runtime.Object) *dag.Graph {
	t.Helper()
	objs := testutil.DecodeObjects(t, `
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---`+docs)
	objs = append(append(objs, more...),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
		testutil.TLSSecret("default", "cert", testutil.SelfSigned(name)))
	return dag.Build(store.FromObjects(objs), dag.Options{Processors: []dag.Processor{gatewayapi.Processor{}}})
}

func TestGatewayTranslation(t *testing.T) {
	res, err := Translate(gatewayGraph(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	l80, l443 := GatewayListenerName(gw, 80), GatewayListenerName(gw, 443)
	listeners := map[string]*listenerv3.Listener{}
	for _, r := range res.Listeners {
		l := r.(*listenerv3.Listener)
		listeners[l.Name] = l
	}
	routes := map[string]*routev3.RouteConfiguration{}
	for _, r := range res.Routes {
		rc := r.(*routev3.RouteConfiguration)
		routes[rc.Name] = rc
	}

	// Port 80: a listener on 0.0.0.0:80 whose HCM reads the route configuration of the
	// same name, one virtual host per host, the route's host under the wildcard
	// listener matched at any depth (no one-label condition).
	http := listeners[l80]
	if http == nil || http.Address.GetSocketAddress().GetAddress() != "0.0.0.0" || http.Address.GetSocketAddress().GetPortValue() != 80 {
		t.Fatalf("listener %s: %v", l80, http)
	}
	if got := rdsName(t, http.FilterChains[0]); got != l80 {
		t.Errorf("port 80 HCM reads routes %q, want %q", got, l80)
	}
	rc := routes[l80]
	if rc == nil {
		t.Fatalf("no route configuration %s", l80)
	}
	if got := domains(rc); !slices.Equal(got, []string{"*", "*.example.com", "a.b.example.com"}) {
		t.Errorf("port 80 domains %v", got)
	}
	for _, vh := range rc.VirtualHosts {
		if vh.Name == "a.b.example.com" && (len(vh.Routes) != 1 || vh.Routes[0].Match.GetPath() != "/x" || len(vh.Routes[0].Match.Headers) != 0) {
			t.Errorf("a.b.example.com routes: %v", vh.Routes)
		}
	}

	// Port 443: one TLS listener, a filter chain per server name, the listener
	// without a hostname taking every other name.
	tlsL := listeners[l443]
	if tlsL == nil || tlsL.Address.GetSocketAddress().GetPortValue() != 443 || len(tlsL.FilterChains) != 2 {
		t.Fatalf("listener %s: %v", l443, tlsL)
	}
	for _, fc := range tlsL.FilterChains {
		want := l443 + "/" + fc.Name
		if got := rdsName(t, fc); got != want {
			t.Errorf("chain %s reads routes %q, want %q", fc.Name, got, want)
		}
		if routes[want] == nil {
			t.Errorf("no route configuration %s", want)
		}
		names := fc.GetFilterChainMatch().GetServerNames()
		switch fc.Name {
		case "*":
			if len(names) != 0 {
				t.Errorf("the hostname-less chain matches server names %v", names)
			}
			// The route attaches to it too (no sectionName): its host is there, and
			// the other listener's host answers 421 (misdirected: a connection for
			// another server name); no catch-all 421, "*" being this listener's own.
			if got := domains(routes[want]); !slices.Equal(got, []string{"*", "a.b.example.com", "secure.example.com"}) {
				t.Errorf("the hostname-less chain's domains %v, want *, the route's host and the other listener's", got)
			} else if st := routes[want].VirtualHosts[2].Routes[0].GetDirectResponse().GetStatus(); st != 421 {
				t.Errorf("secure.example.com on the hostname-less chain answers %d, want 421", st)
			}
		case "secure.example.com":
			if !slices.Equal(names, []string{"secure.example.com"}) {
				t.Errorf("chain server names %v", names)
			}
			if got := domains(routes[want]); !slices.Equal(got, []string{"secure.example.com", "*"}) || routes[want].VirtualHosts[1].Name != MisdirectedVirtualHost {
				t.Errorf("secure.example.com domains %v, want its own then the 421 host", got)
			}
		default:
			t.Errorf("unexpected chain %s", fc.Name)
		}
	}
	if len(res.Secrets) != 1 {
		t.Errorf("%d secrets, want the one certificate once", len(res.Secrets))
	}
	// The shared listener is still there, the Gateway's clusters translated.
	if listeners[ListenerHTTP] == nil || len(res.Clusters) != 1 {
		t.Errorf("shared listener %v, %d clusters", listeners[ListenerHTTP] != nil, len(res.Clusters))
	}
}

func rdsName(t *testing.T, fc *listenerv3.FilterChain) string {
	t.Helper()
	var hcm hcmv3.HttpConnectionManager
	if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	return hcm.GetRds().GetRouteConfigName()
}

func domains(rc *routev3.RouteConfiguration) []string {
	var out []string
	for _, vh := range rc.VirtualHosts {
		out = append(out, vh.Domains...)
	}
	return out
}
