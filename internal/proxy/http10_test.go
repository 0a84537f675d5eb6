package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// rawHTTP sends request on a new connection and reads one response.
func rawHTTP(t *testing.T, addr, request string) (*http.Response, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", request, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// HTTP/1.0 requests are Envoy's: refused with 426 unless http_protocol_options
// accept_http_10 (which Portico's translator sets, as Contour does); one
// without a Host gets 400, or default_host_for_http_10 as its Host.
func TestHTTP10Requests(t *testing.T) {
	cp := startControlPlane(t)
	b := startBackend(t, "web")
	res := func(l *listenerv3.Listener) resources {
		return resources{
			listeners: []*listenerv3.Listener{l},
			routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("web.example.com", toCluster("web", prefixMatch("/"))))},
			clusters:  []*clusterv3.Cluster{edsCluster("web")},
			endpoints: []*endpointv3.ClusterLoadAssignment{assignment("web", b.addr())},
		}
	}
	cp.set("v1", res(httpListener(t)))
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	addr := p.ListenerAddr("ingress_http")
	const with, without = "GET / HTTP/1.0\r\nHost: web.example.com\r\n\r\n", "GET / HTTP/1.0\r\n\r\n"

	if r, _ := rawHTTP(t, addr, with); r.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("HTTP/1.0 without accept_http_10: %d, want 426", r.StatusCode)
	}
	if r, _ := rawHTTP(t, addr, "GET / HTTP/1.1\r\nHost: web.example.com\r\n\r\n"); r.StatusCode != http.StatusOK {
		t.Errorf("HTTP/1.1: %d, want 200", r.StatusCode)
	}

	accept := func(defaultHost string) *listenerv3.Listener {
		return modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
			h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{AcceptHttp_10: true, AllowChunkedLength: true, DefaultHostForHttp_10: defaultHost}
		})
	}
	cp.set("v2", res(accept("")))
	p.waitVersion(t, "v2")
	r, body := rawHTTP(t, addr, with)
	var e echo
	if r.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &e) != nil || e.Host != "web.example.com" {
		t.Errorf("HTTP/1.0 with accept_http_10: %d %q, want 200 from the backend", r.StatusCode, body)
	}
	if r, _ := rawHTTP(t, addr, without); r.StatusCode != http.StatusBadRequest {
		t.Errorf("HTTP/1.0 without a Host: %d, want 400 (missing_host_header)", r.StatusCode)
	}

	cp.set("v3", res(accept("web.example.com")))
	p.waitVersion(t, "v3")
	if r, body := rawHTTP(t, addr, without); r.StatusCode != http.StatusOK {
		t.Errorf("HTTP/1.0 without a Host, default_host_for_http_10: %d %q, want 200", r.StatusCode, body)
	}

	cp.set("v4", res(modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.HttpProtocolOptions = &corev3.Http1ProtocolOptions{DefaultHostForHttp_10: "web.example.com"}
	})))
	cp.expectNACK(t, "type.googleapis.com/envoy.config.listener.v3.Listener", "v4", "default_host_for_http_10 needs accept_http_10")
}
