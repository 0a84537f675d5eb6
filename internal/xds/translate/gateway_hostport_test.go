package translate

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
)

// hostPortGraph has a Gateway with HTTP listeners on 80 and 8080 and HTTPS listeners
// on 443 and 8443, a route with redirects attached to all four, and an Ingress on the
// shared listeners.
func hostPortGraph(t *testing.T) *dag.Graph {
	t.Helper()
	prefix := networkingv1.PathTypePrefix
	ingress := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app"},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: "app.example.com",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}},
		}}},
	}
	return buildWithWeb(t, `
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - {name: http-8080, protocol: HTTP, port: 8080}
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: cert}]}}
  - {name: https-8443, protocol: HTTPS, port: 8443, tls: {certificateRefs: [{name: cert}]}}
---
kind: HTTPRoute
metadata: {name: web, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [foo.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /to-https}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]
  - matches: [{path: {type: PathPrefix, value: /to-http}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: http}}]
  - matches: [{path: {type: PathPrefix, value: /to-example}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, hostname: example.org}}]
  - matches: [{path: {type: PathPrefix, value: /moved}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /new}}}]
  - backendRefs: [{name: web, port: 80}]`, "foo.com", ingress)
}

// TestGatewayListenersKeepHostPort: a Gateway's connection managers keep the Host's port
// (no strip_any_host_port: the backend sees the Host the client sent) and its route
// configurations choose the virtual host by the name alone
// (ignore_port_in_host_matching); the shared listeners strip the port as before. Every
// resource validates.
func TestGatewayListenersKeepHostPort(t *testing.T) {
	res, err := Translate(hostPortGraph(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	gatewayListeners := map[string]bool{}
	for _, port := range []uint32{80, 8080, 443, 8443} {
		gatewayListeners[GatewayListenerName(gw, port)] = true
	}
	seen := map[string]bool{}
	for _, r := range res.Listeners {
		l := r.(*listenerv3.Listener)
		if err := l.ValidateAll(); err != nil {
			t.Errorf("listener %s: %v", l.Name, err)
		}
		_, ofGateway := GatewayOf(l.Name)
		seen[l.Name] = true
		for _, fc := range l.FilterChains {
			hcm := decodeHCM(t, fc)
			switch strip := hcm.GetStripAnyHostPort(); {
			case ofGateway && hcm.StripPortMode != nil:
				t.Errorf("Gateway listener %s chain %q: strip port mode %v, want none", l.Name, fc.Name, hcm.StripPortMode)
			case !ofGateway && !strip:
				t.Errorf("shared listener %s chain %q: strip_any_host_port false, want true", l.Name, fc.Name)
			}
		}
	}
	for name := range gatewayListeners {
		if !seen[name] {
			t.Errorf("no listener %s", name)
		}
	}
	if !seen[ListenerHTTP] {
		t.Errorf("no listener %s", ListenerHTTP)
	}
	for _, r := range res.Routes {
		rc := r.(*routev3.RouteConfiguration)
		if err := rc.ValidateAll(); err != nil {
			t.Errorf("route configuration %s: %v", rc.Name, err)
		}
		_, ofGateway := GatewayOf(rc.Name)
		if rc.IgnorePortInHostMatching != ofGateway {
			t.Errorf("route configuration %s: ignore_port_in_host_matching %v, want %v", rc.Name, rc.IgnorePortInHostMatching, ofGateway)
		}
	}
}

// TestGatewayRedirectPorts: on a Gateway port that is its scheme's default (80, 443)
// clients send no port, and a redirect to a scheme's default port names none; on any
// other port (8080, 8443) the client's Host carries the listener's port, which Envoy
// would keep, so such a redirect names the default port. A redirect to another host, or
// to a port of its own, is the same on every port.
func TestGatewayRedirectPorts(t *testing.T) {
	res, err := Translate(hostPortGraph(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	gw := types.NamespacedName{Namespace: "default", Name: "gw"}
	https := func(port uint32) *routev3.RedirectAction {
		return &routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
			PortRedirect: port, ResponseCode: routev3.RedirectAction_FOUND}
	}
	toHTTP := func(port uint32) *routev3.RedirectAction {
		return &routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: "http"},
			PortRedirect: port, ResponseCode: routev3.RedirectAction_FOUND}
	}
	toExample := &routev3.RedirectAction{SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
		HostRedirect: "example.org", ResponseCode: routev3.RedirectAction_FOUND}
	moved := func(port uint32) *routev3.RedirectAction {
		return &routev3.RedirectAction{PortRedirect: port, PathRewriteSpecifier: &routev3.RedirectAction_PathRedirect{PathRedirect: "/new"},
			ResponseCode: routev3.RedirectAction_FOUND}
	}
	for _, tc := range []struct {
		routes string
		want   map[string]*routev3.RedirectAction // by path prefix
	}{
		{GatewayListenerName(gw, 80), map[string]*routev3.RedirectAction{
			"/to-https": https(0), "/to-http": toHTTP(0), "/to-example": toExample, "/moved": moved(80)}},
		{GatewayListenerName(gw, 8080), map[string]*routev3.RedirectAction{
			"/to-https": https(443), "/to-http": toHTTP(80), "/to-example": toExample, "/moved": moved(8080)}},
		{GatewayListenerName(gw, 443) + "/*", map[string]*routev3.RedirectAction{
			"/to-https": https(0), "/to-http": toHTTP(0), "/to-example": toExample, "/moved": moved(443)}},
		{GatewayListenerName(gw, 8443) + "/*", map[string]*routev3.RedirectAction{
			"/to-https": https(443), "/to-http": toHTTP(80), "/to-example": toExample, "/moved": moved(8443)}},
	} {
		got := map[string]*routev3.RedirectAction{}
		for _, r := range res.Routes {
			rc := r.(*routev3.RouteConfiguration)
			if rc.Name != tc.routes {
				continue
			}
			for _, vh := range rc.VirtualHosts {
				for _, rt := range vh.Routes {
					if rd := rt.GetRedirect(); rd != nil && vh.Name == "foo.com" {
						got[rt.Match.GetPathSeparatedPrefix()+rt.Match.GetPrefix()] = rd
					}
				}
			}
		}
		if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
			t.Errorf("%s redirects (-want +got):\n%s", tc.routes, diff)
		}
	}
}

func decodeHCM(t *testing.T, fc *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	t.Helper()
	var hcm hcmv3.HttpConnectionManager
	if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	return &hcm
}
