package proxy

import (
	"net/http"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
)

// The connection manager writes its Server header after the route's changes, as
// Envoy's does when it encodes the response: with OVERWRITE a route cannot change it,
// with APPEND_IF_ABSENT it cannot remove it, with PASS_THROUGH nothing is written and
// the route configuration's Server (what Portico's translator emits) is one more
// change, which a route's comes after when most_specific_header_mutations_wins.
func TestServerHeaderTransformations(t *testing.T) {
	cp := startControlPlane(t)
	be := startBackend(t, "A") // answers with "Server: backend-A"
	removed := toCluster("A", prefixMatch("/removed"))
	removed.ResponseHeadersToRemove = []string{"server"}
	named := toCluster("A", prefixMatch("/named"))
	named.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("Server", "named")}
	direct := &routev3.Route{Match: prefixMatch("/direct"), Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}}}
	rc := routeConfig("ingress_http", vhost("s.example.com", removed, named, direct, toCluster("A", prefixMatch("/"))))
	portico := routeConfig(rc.Name, rc.VirtualHosts...)
	portico.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("server", "portico")}
	portico.MostSpecificHeaderMutationsWins = true

	const none = "(none)"
	var p *testProxy // the test's: it outlives each subtest
	outer := t
	for _, tc := range []struct {
		name string
		mode hcmv3.HttpConnectionManager_ServerHeaderTransformation
		rc   *routev3.RouteConfiguration
		want map[string]string // path -> Server
	}{
		{"OVERWRITE", hcmv3.HttpConnectionManager_OVERWRITE, rc,
			map[string]string{"/": "portico", "/removed": "portico", "/named": "portico", "/direct": "portico"}},
		{"APPEND_IF_ABSENT", hcmv3.HttpConnectionManager_APPEND_IF_ABSENT, rc,
			map[string]string{"/": "backend-A", "/removed": "portico", "/named": "named", "/direct": "portico"}},
		{"PASS_THROUGH", hcmv3.HttpConnectionManager_PASS_THROUGH, rc,
			map[string]string{"/": "backend-A", "/removed": none, "/named": "named", "/direct": none}},
		{"PASS_THROUGH and the route configuration's Server", hcmv3.HttpConnectionManager_PASS_THROUGH, portico,
			map[string]string{"/": "portico", "/removed": none, "/named": "named", "/direct": "portico"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp.set(tc.name, resources{
				listeners: []*listenerv3.Listener{modifyHCM(t, func(h *hcmv3.HttpConnectionManager) { h.ServerHeaderTransformation = tc.mode })},
				routes:    []*routev3.RouteConfiguration{tc.rc},
				clusters:  []*clusterv3.Cluster{edsCluster("A")},
				endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", be.addr())},
			})
			if p == nil {
				p = startProxy(outer, cp)
			}
			p.waitVersion(t, tc.name)
			got := map[string]string{}
			for path := range tc.want {
				r := get(t, noRedirectClient(), p.httpURL(t, path), "s.example.com", nil)
				if r.Status != http.StatusOK {
					t.Fatalf("%s: status %d: %s", path, r.Status, r.Body)
				}
				got[path] = serverOf(r.Header)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Server by path (-want +got):\n%s", diff)
			}
			// A request that matches no route gets no route's changes.
			if r := get(t, noRedirectClient(), p.httpURL(t, "/"), "unknown.example.com", nil); r.Status != http.StatusNotFound ||
				(tc.mode == hcmv3.HttpConnectionManager_PASS_THROUGH) != (serverOf(r.Header) == none) {
				t.Errorf("unknown host: status %d, Server %s", r.Status, serverOf(r.Header))
			}
		})
	}
}

func serverOf(h http.Header) string {
	if vs, ok := h["Server"]; ok {
		return vs[0]
	}
	return "(none)"
}

// The response carries the request's X-Request-Id only when the connection manager
// says always_set_request_id_in_response, as in Envoy; otherwise a route may set the
// header itself. The upstream gets the id either way.
func TestRequestIDInResponses(t *testing.T) {
	cp := startControlPlane(t)
	be := startBackend(t, "A")
	own := toCluster("A", prefixMatch("/own"))
	own.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-request-id", "the route's")}
	var p *testProxy
	for _, always := range []bool{false, true} {
		version := map[bool]string{false: "v1", true: "v2"}[always]
		cp.set(version, resources{
			listeners: []*listenerv3.Listener{modifyHCM(t, func(h *hcmv3.HttpConnectionManager) { h.AlwaysSetRequestIdInResponse = always })},
			routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", own, toCluster("A", prefixMatch("/"))))},
			clusters:  []*clusterv3.Cluster{edsCluster("A")},
			endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", be.addr())},
		})
		if p == nil {
			p = startProxy(t, cp)
		}
		p.waitVersion(t, version)
		r := get(t, noRedirectClient(), p.httpURL(t, "/"), "h.example.com", nil)
		sent := r.Echo.Header.Get("X-Request-Id")
		if !uuidV4.MatchString(sent) {
			t.Errorf("always_set_request_id_in_response %t: upstream X-Request-Id %q, want a generated UUIDv4", always, sent)
		}
		want := map[bool]string{false: "", true: sent}[always]
		if got := r.Header.Get("X-Request-Id"); got != want {
			t.Errorf("always_set_request_id_in_response %t: response X-Request-Id %q, want %q", always, got, want)
		}
		r = get(t, noRedirectClient(), p.httpURL(t, "/own"), "h.example.com", nil)
		want = map[bool]string{false: "the route's", true: r.Echo.Header.Get("X-Request-Id")}[always]
		if got := r.Header.Get("X-Request-Id"); got != want {
			t.Errorf("always_set_request_id_in_response %t: response X-Request-Id on a route that sets it %q, want %q", always, got, want)
		}
	}
}
