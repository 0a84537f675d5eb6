package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// rawTLSBackend is an HTTP/1.1 upstream over TLS written on raw connections,
// so that it can answer what net/http's server never would: "/bad" gets a
// response with a space before a field's colon, a websocket upgrade a 101
// after which the bytes come back upper-cased, anything else "ok".
type rawTLSBackend struct {
	ln       net.Listener
	accepted atomic.Int64
}

func startRawTLSBackend(t *testing.T, cert tls.Certificate) *rawTLSBackend {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	b := &rawTLSBackend{ln: ln}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			go b.serve(conn)
		}
	}()
	return b
}

func (b *rawTLSBackend) serve(conn net.Conn) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang, not a speed limit
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		switch {
		case strings.EqualFold(req.Header.Get("Upgrade"), "websocket"):
			_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
			buf := make([]byte, 64)
			for {
				n, err := br.Read(buf)
				if n > 0 {
					_, _ = conn.Write([]byte(strings.ToUpper(string(buf[:n]))))
				}
				if err != nil {
					return
				}
			}
		case req.URL.Path == "/bad":
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nX-Bad : v\r\nContent-Length: 2\r\n\r\nok")
		default:
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}
}

// TestUpstreamTLSOnTheCodec: an HTTP/1.1 cluster over TLS is served by the
// codec's client, as a clear-text one is: its connections are pooled, a
// response the codec refuses (a space before a field's colon, which
// net/http's client passes on) is the proxy's 502 rather than forwarded, and
// a websocket upgrade is spliced over the TLS connection.
func TestUpstreamTLSOnTheCodec(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	be := startRawTLSBackend(t, ca.keyPair(t, "backend.internal"))
	cp := startControlPlane(t)
	cluster := edsCluster("tls")
	cluster.TransportSocket = upstreamTLSSocket(t, "backend.internal", []string{"http/1.1"}, validation(ca.pem(), "backend.internal"))
	websocket := func(a *routev3.RouteAction) {
		a.UpgradeConfigs = []*routev3.RouteAction_UpgradeConfig{{UpgradeType: "websocket"}}
	}
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{cluster},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("tls", be.ln.Addr().String())},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", withAction(toCluster("tls", prefixMatch("/")), websocket)))},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	for i := range 3 {
		if i == 2 {
			// Idle long enough (over the client's 100 ms) for its reuse to look
			// whether the upstream closed it, on the socket under TLS: it did not.
			time.Sleep(300 * time.Millisecond)
		}
		if r := get(t, c, p.httpURL(t, "/ok"), "x", nil); r.Status != 200 || r.Body != "ok" {
			t.Fatalf("GET /ok: %d %q, want 200 \"ok\"", r.Status, r.Body)
		}
	}
	if n := be.accepted.Load(); n != 1 {
		t.Errorf("%d TLS connections for 3 requests, want 1 (pooled)", n)
	}
	if r := get(t, c, p.httpURL(t, "/bad"), "x", nil); r.Status != http.StatusBadGateway {
		t.Errorf("GET /bad: %d %q, want 502 (a response the codec refuses)", r.Status, r.Body)
	}
	if r, echoed := upgrade(t, p.ListenerAddr("ingress_http"), "/socket"); r.StatusCode != http.StatusSwitchingProtocols || echoed != "PING" {
		t.Errorf("websocket over the TLS upstream: %d, echoed %q; want 101 and PING", r.StatusCode, echoed)
	}
}
