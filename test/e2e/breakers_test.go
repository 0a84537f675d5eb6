package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/echo"
)

// gated is a backend that holds every request until its gate opens: requests stay in
// flight for as long as the test needs, whatever the machine's speed.
type gated struct {
	addr    string
	arrived chan string // the path of each request, as it arrives
	gate    chan struct{}
	once    sync.Once
}

func startGated(t *testing.T, ns, name string) *gated {
	t.Helper()
	g := &gated{arrived: make(chan string, 100), gate: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.arrived <- r.URL.Path
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return
		}
		body, _ := json.Marshal(echo.Response{Service: name, Namespace: ns, Path: r.URL.Path, Proto: r.Proto})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	g.addr = srv.Listener.Addr().String()
	t.Cleanup(func() { g.open(); srv.Close() })
	return g
}

func (g *gated) open() { g.once.Do(func() { close(g.gate) }) }

// waitArrivals waits until n requests have arrived at the backend.
func (g *gated) waitArrivals(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		select {
		case <-g.arrived:
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d of %d requests reached the backend", i, n)
		}
	}
}

// noMoreArrivals fails if a request is at the backend now (a request that should wait).
func (g *gated) noMoreArrivals(t *testing.T) {
	t.Helper()
	select {
	case p := <-g.arrived:
		t.Fatalf("a request for %s reached the backend; it should have waited", p)
	default:
	}
}

// annotatedService is serviceManifest with the Service's annotations (a YAML flow map's
// entries).
func annotatedService(ns, name, annotations string, addrs ...string) string {
	return strings.Replace(serviceManifest(ns, name, addrs...), "namespace: "+ns+"}", "namespace: "+ns+", annotations: {"+annotations+"}}", 1)
}

// TestCircuitBreakerAnnotations: Contour's Service annotations limit what the embedded
// proxy sends, as Envoy's circuit breakers do. Over max-requests, a request is
// answered 503 with x-envoy-overloaded: true at once; without the annotation, the same
// number of requests all reach the backend. Over max-connections a request waits for
// a connection (pending), and over max-pending-requests it is answered 503 too; the
// waiting one goes through when a connection is free. Each overflow is counted.
func TestCircuitBreakerAnnotations(t *testing.T) {
	t.Parallel()
	limited := startGated(t, "cb", "limited")
	free := startGated(t, "cb", "free")
	pending := startGated(t, "cb", "pending")
	e := start(t, map[string]string{
		"backends.yaml": annotatedService("cb", "limited", `projectcontour.io/max-requests: "2"`, limited.addr) + "---\n" +
			serviceManifest("cb", "free", free.addr) + "---\n" +
			annotatedService("cb", "pending", `projectcontour.io/max-connections: "1", projectcontour.io/max-pending-requests: "1"`, pending.addr),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: cb, namespace: cb}
spec:
  virtualhost: {fqdn: cb.example.com}
  routes:
  - conditions: [{prefix: /limited}]
    services: [{name: limited, port: 80}]
  - conditions: [{prefix: /free}]
    services: [{name: free, port: 80}]
  - conditions: [{prefix: /pending}]
    services: [{name: pending, port: 80}]
`,
	})
	// inFlight sends a request in the background; its result arrives on the channel.
	inFlight := func(path string) <-chan result {
		out := make(chan result, 1)
		go func() { out <- e.get("cb.example.com", path) }()
		return out
	}
	wantOverflow := func(path string) {
		t.Helper()
		r := e.get("cb.example.com", path)
		if r.status != http.StatusServiceUnavailable || r.header.Get("X-Envoy-Overloaded") != "true" || !strings.Contains(r.body, "overflow") {
			t.Errorf("GET %s over the limit: %d %q, x-envoy-overloaded %q; want 503 overflow with x-envoy-overloaded: true",
				path, r.status, r.body, r.header.Get("X-Envoy-Overloaded"))
		}
	}
	wantOK := func(what string, results ...<-chan result) {
		t.Helper()
		for _, c := range results {
			if r := <-c; r.status != http.StatusOK {
				t.Errorf("%s: %d %q, want 200", what, r.status, r.body)
			}
		}
	}

	// max-requests: 2.
	a, b := inFlight("/limited/a"), inFlight("/limited/b")
	limited.waitArrivals(t, 2)
	wantOverflow("/limited/c")
	limited.noMoreArrivals(t)
	limited.open()
	wantOK("held /limited requests", a, b)
	e.waitSample("portico_proxy_upstream_overflows_total", map[string]string{"service_name": "limited", "breaker": "max_requests"}, 1)
	if r := e.get("cb.example.com", "/limited/d"); r.status != http.StatusOK {
		t.Errorf("GET /limited/d once the others are done: %d, want 200", r.status)
	}

	// No annotation: three at once all reach the backend.
	held := []<-chan result{inFlight("/free/a"), inFlight("/free/b"), inFlight("/free/c")}
	free.waitArrivals(t, 3)
	free.open()
	wantOK("held /free requests", held...)

	// max-connections: 1, max-pending-requests: 1.
	first := inFlight("/pending/first")
	pending.waitArrivals(t, 1)
	second := inFlight("/pending/second")
	e.waitSample("portico_proxy_upstream_overflows_total", map[string]string{"service_name": "pending", "breaker": "max_connections"}, 1)
	pending.noMoreArrivals(t)
	wantOverflow("/pending/third")
	e.waitSample("portico_proxy_upstream_overflows_total", map[string]string{"service_name": "pending", "breaker": "max_pending_requests"}, 1)
	pending.open()
	wantOK("the first and the pending /pending requests", first, second)
	pending.waitArrivals(t, 1) // the pending one reached the backend once the first was done
}

// TestUpstreamProtocolAnnotationIngress: an Ingress backend on a Service port annotated
// projectcontour.io/upstream-protocol.h2c is spoken to in HTTP/2 clear text, as
// Contour does; another port of the same Service stays HTTP/1.1.
func TestUpstreamProtocolAnnotationIngress(t *testing.T) {
	t.Parallel()
	addr := startEcho(t, "up", "echo")
	host, port, _ := net.SplitHostPort(addr)
	e := start(t, map[string]string{
		"backends.yaml": `
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: up, annotations: {projectcontour.io/upstream-protocol.h2c: "80"}}
spec:
  ports: [{name: http, port: 80, targetPort: http}, {name: plain, port: 81, targetPort: plain}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: echo, namespace: up}
subsets:
- addresses: [{ip: ` + host + `}]
  ports: [{name: http, port: ` + port + `}, {name: plain, port: ` + port + `}]
`,
		"ingress.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: up}
spec:
  rules:
  - host: h2c.example.com
    http:
      paths:
      - {path: /h2c, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}
      - {path: /plain, pathType: Prefix, backend: {service: {name: echo, port: {name: plain}}}}
`,
	})
	for path, want := range map[string]string{"/h2c": "HTTP/2.0", "/plain": "HTTP/1.1"} {
		r := e.get("h2c.example.com", path)
		if r.status != http.StatusOK || r.echo.Proto != want {
			t.Errorf("GET %s: %d, the backend got %q; want 200 over %s", path, r.status, r.echo.Proto, want)
		}
	}
}
