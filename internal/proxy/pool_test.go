package proxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// barrierBackend answers a round's requests only once all of them have
// arrived, so that each round has exactly that many requests in flight,
// and counts the connections it accepted.
type barrierBackend struct {
	conns atomic.Int64
	mu    sync.Mutex
	n     int           // requests per round
	seen  int           // requests of the current round so far
	open  chan struct{} // closed when the current round is complete
}

func (b *barrierBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	open := b.open
	if b.seen++; b.seen == b.n {
		close(b.open)
		b.seen, b.open = 0, make(chan struct{})
	}
	b.mu.Unlock()
	select {
	case <-open:
	case <-r.Context().Done():
	}
	_, _ = io.WriteString(w, "ok")
}

// Like Envoy's connection pool, the proxy keeps the upstream connections a
// burst of concurrent requests opened (Envoy keeps up to its default
// max_connections, 1024): the next burst reuses them instead of connecting again.
func TestUpstreamConnectionsReusedAcrossBursts(t *testing.T) {
	const concurrent, rounds = 300, 3
	be := &barrierBackend{n: concurrent, open: make(chan struct{})}
	srv := httptest.NewUnstartedServer(be)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			be.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("A")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", srv.Listener.Addr().String())},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")

	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: concurrent}}
	defer client.CloseIdleConnections()
	url := p.httpURL(t, "/")
	for round := range rounds {
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				resp, err := client.Get(url)
				if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("round %d: status %d", round, resp.StatusCode)
				}
			})
		}
		wg.Wait()
	}
	if got := be.conns.Load(); got != concurrent {
		t.Errorf("the backend accepted %d connections over %d bursts of %d concurrent requests, want %d (one per request in flight, then reused)",
			got, rounds, concurrent, concurrent)
	}
}
