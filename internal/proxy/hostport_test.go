package proxy

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// The three ways a Host's port meets routing, as Envoy has them:
//   - strip_any_host_port (the connection manager's): the port is gone before routing,
//     and the upstream gets the Host without it;
//   - ignore_port_in_host_matching (the route configuration's): the virtual host is
//     chosen by the name alone, and the Host goes upstream as the client sent it;
//   - neither: the port is part of what domains are matched against.

// namedListener is httpListener named name, reading the route configuration of the
// same name, its connection manager changed by edit.
func namedListener(t *testing.T, name string, edit func(*hcmv3.HttpConnectionManager)) *listenerv3.Listener {
	t.Helper()
	l := modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.GetRds().RouteConfigName = name
		edit(h)
	})
	l.Name = name
	return l
}

func keepPort(h *hcmv3.HttpConnectionManager) { h.StripPortMode = nil }

func redirectRoute(prefix string, rd *routev3.RedirectAction) *routev3.Route {
	return &routev3.Route{Name: "redirect" + prefix, Match: prefixMatch(prefix), Action: &routev3.Route_Redirect{Redirect: rd}}
}

// hostPortRoutes are the routes of every virtual host of these tests: redirects to
// https (no port: the request's is kept unless it is http's default), to https on 443,
// and to another host; everything else to cluster.
func hostPortRoutes(cluster string) []*routev3.Route {
	https := &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true}
	return []*routev3.Route{
		redirectRoute("/to-https", &routev3.RedirectAction{SchemeRewriteSpecifier: https}),
		redirectRoute("/to-443", &routev3.RedirectAction{SchemeRewriteSpecifier: https, PortRedirect: 443}),
		redirectRoute("/to-other", &routev3.RedirectAction{HostRedirect: "other.test"}),
		toCluster(cluster, prefixMatch("/")),
	}
}

func TestHostPortRoutingAndForwarding(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{
		namedListener(t, "strip", func(*hcmv3.HttpConnectionManager) {}),
		namedListener(t, "ignore", keepPort),
		namedListener(t, "exact", keepPort),
		namedListener(t, "dot", func(h *hcmv3.HttpConnectionManager) { keepPort(h); h.StripTrailingHostDot = true }),
	}
	ignore := routeConfig("ignore", vhost("foo.com", hostPortRoutes("A")...), vhost("*.wild.com", toCluster("B", prefixMatch("/"))))
	ignore.IgnorePortInHostMatching = true
	dot := routeConfig("dot", vhost("foo.com", toCluster("A", prefixMatch("/"))))
	dot.IgnorePortInHostMatching = true
	res.routes = []*routev3.RouteConfiguration{
		routeConfig("strip", vhost("foo.com", hostPortRoutes("A")...)),
		ignore,
		routeConfig("exact", vhost("foo.com", toCluster("A", prefixMatch("/"))), vhost("foo.com:8090", toCluster("B", prefixMatch("/"))),
			vhost("bar.*", toCluster("C", prefixMatch("/")))),
		dot,
	}
	cp.set("v1", res)
	p := startProxyOn(t, cp, map[string]string{"strip": "127.0.0.1:0", "ignore": "127.0.0.1:0", "exact": "127.0.0.1:0", "dot": "127.0.0.1:0"})
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	for _, tc := range []struct {
		listener, host, path string
		status               int
		backend              string // answered by
		sawHost              string // the Host the backend saw
		location             string // of a redirect
	}{
		// The shared listeners' way (Contour's): routed by name, forwarded without port.
		{"strip", "foo.com:8090", "/", 200, "A", "foo.com", ""},
		{"strip", "foo.com", "/", 200, "A", "foo.com", ""},
		{"strip", "foo.com:8090", "/to-https", 301, "", "", "https://foo.com/to-https"},
		// A Gateway's: routed by name, forwarded as sent, the case kept.
		{"ignore", "foo.com:8090", "/", 200, "A", "foo.com:8090", ""},
		{"ignore", "FOO.com:1234", "/", 200, "A", "FOO.com:1234", ""},
		{"ignore", "foo.com", "/", 200, "A", "foo.com", ""},
		{"ignore", "a.b.wild.com:8080", "/", 200, "B", "a.b.wild.com:8080", ""},
		{"ignore", "bar.com:8090", "/", 404, "", "", ""},
		// Envoy keeps the request's port in a Location unless the redirect names one,
		// or leaves the scheme whose default port it is.
		{"ignore", "foo.com:8090", "/to-https", 301, "", "", "https://foo.com:8090/to-https"},
		{"ignore", "foo.com:80", "/to-https", 301, "", "", "https://foo.com/to-https"},
		{"ignore", "foo.com", "/to-https", 301, "", "", "https://foo.com/to-https"},
		{"ignore", "foo.com:8090", "/to-443", 301, "", "", "https://foo.com:443/to-443"},
		{"ignore", "foo.com:8090", "/to-other", 301, "", "", "http://other.test/to-other"},
		// Neither: the port is part of the host that domains are matched against.
		{"exact", "foo.com", "/", 200, "A", "foo.com", ""},
		{"exact", "foo.com:8090", "/", 200, "B", "foo.com:8090", ""},
		{"exact", "foo.com:8080", "/", 404, "", "", ""},
		{"exact", "bar.com:8080", "/", 200, "C", "bar.com:8080", ""},
		// strip_trailing_host_dot takes the dot before the port, which stays.
		{"dot", "foo.com.:8090", "/", 200, "A", "foo.com:8090", ""},
		{"dot", "foo.com.", "/", 200, "A", "foo.com", ""},
	} {
		r := get(t, c, "http://"+p.ListenerAddr(tc.listener)+tc.path, tc.host, nil)
		if r.Status != tc.status || r.Backend != tc.backend || r.Echo.Host != tc.sawHost || r.Header.Get("Location") != tc.location {
			t.Errorf("%s: Host %s %s: %d from %q (Host %q, Location %q), want %d from %q (Host %q, Location %q)",
				tc.listener, tc.host, tc.path, r.Status, r.Backend, r.Echo.Host, r.Header.Get("Location"),
				tc.status, tc.backend, tc.sawHost, tc.location)
		}
	}
}

// TestHostPortIgnoredWithVHDS: a VHDS route configuration that ignores the port keeps
// doing so for the virtual hosts it receives, and after one of them changes (the table
// patched rather than built anew).
func TestHostPortIgnoredWithVHDS(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{modifyHCM(t, keepPort)}
	rc := vhdsConfig("ingress_http")
	rc.IgnorePortInHostMatching = true
	res.routes = []*routev3.RouteConfiguration{rc}
	res.vhosts = vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("B", "to-B")))
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	expectBackends(t, p, map[string]string{"a.test:8080": "A", "b.test:1234": "B", "c.test:8080": "404"})

	res.vhosts = vhdsHosts("ingress_http", vhost("a.test", routeTo("A", "to-A")), vhost("b.test", routeTo("C", "to-C")))
	cp.set("v2", res)
	p.waitVersion(t, "v2")
	if httpTable(p).Patch == nil {
		t.Error("the table was built anew, want it patched with the one host")
	}
	expectBackends(t, p, map[string]string{"a.test:8080": "A", "b.test:1234": "C"})
	if r := get(t, noRedirectClient(), p.httpURL(t, "/"), "b.test:1234", nil); r.Echo.Host != "b.test:1234" {
		t.Errorf("the backend saw Host %q, want b.test:1234", r.Echo.Host)
	}
}

// TestStripMatchingHostPortRefused: strip_matching_host_port strips only the port the
// listener listens on, which the proxy binding it elsewhere cannot honour: NACKed, the
// previous listener kept.
func TestStripMatchingHostPortRefused(t *testing.T) {
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("foo.com", toCluster("A", prefixMatch("/"))))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	res.listeners = []*listenerv3.Listener{modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.StripPortMode, h.StripMatchingHostPort = nil, true
	})}
	cp.set("v2", res)
	cp.expectNACK(t, resourcev3.ListenerType, "v2", "strip_matching_host_port")
	if r := get(t, noRedirectClient(), p.httpURL(t, "/"), "foo.com:8080", nil); r.Backend != "A" || r.Echo.Host != "foo.com" {
		t.Errorf("after the NACK: %q saw Host %q, want A and foo.com", r.Backend, r.Echo.Host)
	}
}
