package proxy

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/logbatch"
	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/hcm"
)

// gatedSink holds access log lines until opened, as a log pipe whose reader
// stalls would; other log lines pass. It counts the writes carrying access
// log lines.
type gatedSink struct {
	logs        *logCapture
	open        chan struct{}
	accessWrite atomic.Int64
}

func (g *gatedSink) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"msg":"access"`)) {
		<-g.open
		g.accessWrite.Add(1)
	}
	return g.logs.Write(p)
}

// startGatedProxy serves every request from one backend, logging through a
// closed gatedSink (behind a logbatch.Writer if batched), with room for
// queue access log lines.
func startGatedProxy(t *testing.T, queue int, batched bool) (*testProxy, *gatedSink) {
	t.Helper()
	cp := startControlPlane(t)
	be := startBackend(t, "A")
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))},
		clusters:  []*clusterv3.Cluster{edsCluster("A")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("A", be.addr())},
	})
	gate := &gatedSink{open: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-gate.open:
		default:
			close(gate.open) // let the proxy stop
		}
	})
	sink := func(l *logCapture) io.Writer {
		gate.logs = l
		if batched {
			return logbatch.New(gate)
		}
		return gate
	}
	p := startProxyWith(t, cp, map[string]string{"ingress_http": "127.0.0.1:0"}, sink, queue)
	p.waitVersion(t, "v1")
	return p, gate
}

// requestAll sends n requests from clients concurrent clients, each of which
// must be answered 200: a request blocked by the log sink would time out.
func requestAll(t *testing.T, p *testProxy, clients, n int) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	url := p.httpURL(t, "/")
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for c := range clients {
		wg.Go(func() {
			for i := c; i < n; i += clients {
				resp, err := client.Get(url)
				if err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses <- resp.StatusCode
			}
		})
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusOK {
			t.Errorf("status %d, want 200", s)
		}
	}
}

// A log sink that stops reading must not hold requests up: lines that do not
// fit the queue are dropped and counted, and the others are written once the
// sink moves again.
func TestAccessLogStalledSinkDoesNotBlockRequests(t *testing.T) {
	const queue, n = 4, 20
	p, gate := startGatedProxy(t, queue, false)
	requestAll(t, p, 1, n)
	dropped := func() int {
		v, _ := metricValue(t, p, "portico_proxy_access_log_dropped_total", nil)
		return int(v)
	}
	// The writer holds one line (blocked in the sink) or none yet, and the
	// queue 4: at least n-queue-1 lines are dropped, or all but one of them
	// when the last request's line, queued after its response left (a
	// response is sent once whole), is not queued yet.
	waitFor(t, "the lines that do not fit dropped", func() bool { return dropped() >= n-queue-2 })
	close(gate.open)
	// Every line is written or dropped; the last one may find room once the
	// sink moves.
	waitFor(t, "every line written or dropped", func() bool { return len(p.logs.records("access"))+dropped() == n })
	if d := dropped(); d < n-queue-2 || d > n-queue {
		t.Errorf("portico_proxy_access_log_dropped_total = %d, want %d to %d", d, n-queue-2, n-queue)
	}
	want := n - dropped()
	p.stop()
	if got := len(p.logs.records("access")); got != want {
		t.Errorf("%d access log lines after shutdown, want %d (%d requests, %d dropped)", got, want, n, dropped())
	}
}

// Under concurrent load every line is kept (the queue is large enough), and
// lines still queued at shutdown are written before Run returns.
func TestAccessLogWrittenOnShutdown(t *testing.T) {
	const n = 400
	p, gate := startGatedProxy(t, accesslog.Queue, true)
	requestAll(t, p, 16, n)
	if got := len(p.logs.records("access")); got != 0 {
		t.Fatalf("%d access log lines went through the closed sink", got)
	}

	stopped := make(chan struct{})
	go func() {
		p.stop()
		close(stopped)
	}()
	close(gate.open)
	<-stopped
	if got := len(p.logs.records("access")); got != n {
		t.Errorf("%d access log lines when Run returned, want %d", got, n)
	}
	if dropped, _ := metricValue(t, p, "portico_proxy_access_log_dropped_total", nil); dropped != 0 {
		t.Errorf("portico_proxy_access_log_dropped_total = %v, want 0", dropped)
	}
}

// Lines queued in a burst are written in batches, in the order the requests
// finished, and the last one is written without waiting for more traffic.
func TestAccessLogBurstIsBatched(t *testing.T) {
	const n = 100 // about 40 KB of lines: less than a logbatch.MaxBatch
	p, gate := startGatedProxy(t, accesslog.Queue, true)
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	// One request at a time on one connection, so that the lines are queued
	// in request order; the first one's batch blocks in the sink, the others
	// wait in the queue.
	for i := range n {
		resp, err := client.Get(p.httpURL(t, "/burst/"+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	close(gate.open)
	waitFor(t, "every access log line", func() bool { return len(p.logs.records("access")) == n })
	for i, rec := range p.logs.records("access") {
		if want := "/burst/" + strconv.Itoa(i); rec["path"] != want {
			t.Fatalf("access log line %d has path %v, want %s", i, rec["path"], want)
		}
	}
	// The first line went alone, the others queued meanwhile make one batch;
	// the last request's line may have been queued after the client had its
	// response, and the sink opened, and go alone too.
	if w := gate.accessWrite.Load(); w > 3 {
		t.Errorf("%d lines took %d writes, want 3 at most", n, w)
	}
}

func TestRequestIDsAreUUIDv4(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := hcm.NewRequestID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("request id %q is not a UUIDv4", id)
		}
		if seen[id] {
			t.Fatalf("request id %q generated twice", id)
		}
		seen[id] = true
	}
}
