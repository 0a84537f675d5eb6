package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"
)

// hcBackend answers health checks on /healthz with a settable status (or
// not at all while hang is set), and other requests with its name.
type hcBackend struct {
	name   string
	srv    *httptest.Server
	status atomic.Int32
	hang   atomic.Bool
	checks atomic.Int64 // health checks received

	mu        sync.Mutex
	host, ua  string // of the last health check
	failsSent int64  // non-200 answers to health checks
}

func startHCBackend(t *testing.T, name string) *hcBackend {
	t.Helper()
	b := &hcBackend{name: name}
	b.status.Store(200)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(echo{Backend: name})
			return
		}
		b.checks.Add(1)
		b.mu.Lock()
		b.host, b.ua = r.Host, r.Header.Get("User-Agent")
		b.mu.Unlock()
		if b.hang.Load() {
			<-r.Context().Done()
			return
		}
		status := int(b.status.Load())
		if status != 200 {
			b.mu.Lock()
			b.failsSent++
			b.mu.Unlock()
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *hcBackend) addr() string { return b.srv.Listener.Addr().String() }

func (b *hcBackend) fails() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failsSent
}

// hcCluster is an EDS cluster with the translator's health check shape.
func hcCluster(name string, interval time.Duration, unhealthy, healthy uint32) *clusterv3.Cluster {
	c := edsCluster(name)
	c.HealthChecks = []*corev3.HealthCheck{httpHealthCheck("/healthz", "", interval, unhealthy, healthy)}
	return c
}

func backendsOf(t *testing.T, c *http.Client, url string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		r := get(t, c, url, "x", nil)
		if r.Status != 200 {
			seen[fmt.Sprint(r.Status)]++
			continue
		}
		seen[r.Backend]++
	}
	return seen
}

// TestHealthChecks: endpoints failing their checks are ejected and come
// back, with Envoy's thresholds, and load balancing follows. The cluster has
// the translator's shape: every failing status but 503 is retriable.
func TestHealthChecks(t *testing.T) {
	t.Parallel()
	a, b := startHCBackend(t, "a"), startHCBackend(t, "b")
	cp := startControlPlane(t)
	hc := hcCluster("hc", 50*time.Millisecond, 5, 2)
	hc.HealthChecks[0].GetHttpHealthCheck().Host = "hc.example.com"
	hc.HealthChecks[0].GetHttpHealthCheck().RetriableStatuses = []*typev3.Int64Range{{Start: 100, End: 503}, {Start: 504, End: 600}}
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{hc},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("hc", a.addr(), b.addr())},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("hc", prefixMatch("/"))))},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	url := p.httpURL(t, "/")
	healthy := func(be *hcBackend) bool { return endpointHealthy(p, "hc", be.addr()) }

	waitFor(t, "both endpoints healthy", func() bool { return healthy(a) && healthy(b) })
	b.mu.Lock()
	host, ua := b.host, b.ua
	b.mu.Unlock()
	if host != "hc.example.com" || ua != "Envoy/HC" {
		t.Errorf("health check Host %q User-Agent %q, want hc.example.com and Envoy/HC", host, ua)
	}
	if v, ok := gaugeValue(t, p, "portico_proxy_cluster_healthy_endpoints", "hc"); !ok || v != 2 {
		t.Errorf("healthy endpoints gauge = %v (present %v), want 2", v, ok)
	}

	// readmit brings b back and checks that it took healthy_threshold (2)
	// successes and that b gets traffic again.
	readmit := func(t *testing.T) {
		t.Helper()
		b.status.Store(200)
		checks := b.checks.Load()
		waitFor(t, "b re-admitted", func() bool { return healthy(b) })
		if n := b.checks.Load() - checks; n < 2 {
			t.Errorf("re-admitted after %d checks, want at least healthy_threshold (2)", n)
		}
		if seen := backendsOf(t, c, url, 10); seen["a"] != 5 || seen["b"] != 5 {
			t.Errorf("after re-admission requests went to %v, want round robin over a and b", seen)
		}
	}
	t.Run("a 503 ejects at once", func(t *testing.T) {
		before := b.fails()
		b.status.Store(503)
		waitFor(t, "b ejected", func() bool { return !healthy(b) })
		// unhealthy_threshold is 5: the first 503 ejected it (the checker
		// may have sent another since).
		if n := b.fails() - before; n > 3 {
			t.Errorf("ejected after %d failing checks, want the first", n)
		}
		waitFor(t, "gauge at 1", func() bool {
			v, _ := gaugeValue(t, p, "portico_proxy_cluster_healthy_endpoints", "hc")
			return v == 1
		})
		// 1 of 2 healthy is 50%: not below the panic threshold.
		if seen := backendsOf(t, c, url, 10); seen["a"] != 10 {
			t.Errorf("with b ejected, requests went to %v, want all to a", seen)
		}
		readmit(t)
	})
	t.Run("a retriable 500 counts towards unhealthy_threshold", func(t *testing.T) {
		before := b.fails()
		b.status.Store(500)
		waitFor(t, "b ejected", func() bool { return !healthy(b) })
		if n := b.fails() - before; n < 5 {
			t.Errorf("ejected after %d failing checks, want unhealthy_threshold (5)", n)
		}
		readmit(t)
	})

	t.Run("transitions are logged", func(t *testing.T) {
		var ejected, admitted bool
		for _, rec := range p.logs.records("health check transition") {
			if rec["cluster"] != "hc" || rec["endpoint"] != b.addr() {
				continue
			}
			switch {
			case rec["healthy"] == false && rec["reason"] == "status 503":
				ejected = true
			case rec["healthy"] == true && rec["reason"] == "status 200":
				admitted = true
			}
		}
		if !ejected || !admitted {
			t.Errorf("transition log lines: ejected (status 503) %v, admitted %v", ejected, admitted)
		}
	})

	t.Run("health survives a configuration swap", func(t *testing.T) {
		b.status.Store(503)
		waitFor(t, "b ejected", func() bool { return !healthy(b) })
		next := res
		next.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			withAction(toCluster("hc", prefixMatch("/")), func(a *routev3.RouteAction) { a.PrefixRewrite = "/v2" })))}
		cp.set("v2", next)
		p.waitVersion(t, "v2")
		if healthy(b) || !healthy(a) {
			t.Errorf("after the swap a healthy %v, b healthy %v; want the health kept", healthy(a), healthy(b))
		}
		if seen := backendsOf(t, c, url, 6); seen["a"] != 6 {
			t.Errorf("after the swap requests went to %v, want all to a", seen)
		}
		b.status.Store(200)
		waitFor(t, "b re-admitted", func() bool { return healthy(b) })
	})
}

// TestHealthCheckThresholds: timeouts and connection errors eject only after
// unhealthy_threshold consecutive failures, and a new endpoint is admitted
// after a single success, whatever healthy_threshold says.
func TestHealthCheckThresholds(t *testing.T) {
	t.Parallel()
	a, b := startHCBackend(t, "a"), startHCBackend(t, "b")
	cp := startControlPlane(t)
	// A 200ms interval tells the first check from the third one.
	hc := hcCluster("hc", 200*time.Millisecond, 3, 3)
	hc.HealthChecks[0].Timeout = durationpb.New(100 * time.Millisecond)
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{hc},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("hc", a.addr())},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("hc", prefixMatch("/"))))},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	healthy := func(be *hcBackend) bool { return endpointHealthy(p, "hc", be.addr()) }

	t.Run("a new endpoint needs one success", func(t *testing.T) {
		waitFor(t, "a healthy", func() bool { return healthy(a) })
		if n := a.checks.Load(); n > 2 {
			t.Errorf("a admitted after %d checks, want the first (healthy_threshold 3 applies later)", n)
		}
		next := res
		next.endpoints = []*endpointv3.ClusterLoadAssignment{assignment("hc", a.addr(), b.addr())}
		cp.set("v2", next)
		p.waitVersion(t, "v2")
		waitFor(t, "b healthy", func() bool { return healthy(b) })
		if n := b.checks.Load(); n > 2 {
			t.Errorf("b admitted after %d checks, want the first", n)
		}
	})
	t.Run("timeouts count towards unhealthy_threshold", func(t *testing.T) {
		before := a.checks.Load()
		a.hang.Store(true)
		waitFor(t, "a ejected", func() bool { return !healthy(a) })
		// Each failing check takes the 100ms timeout; the ejection comes
		// with the third.
		if n := a.checks.Load() - before; n < 3 {
			t.Errorf("ejected after %d timed out checks, want unhealthy_threshold (3)", n)
		}
		a.hang.Store(false)
		waitFor(t, "a re-admitted", func() bool { return healthy(a) })
	})
}

// TestHealthCheckRequest checks what one check sends and how its answer counts.
func TestHealthCheckRequest(t *testing.T) {
	t.Parallel()
	b := startHCBackend(t, "b")
	uc := &upstream.Cluster{Name: "ns/svc/80", Dialer: unitDialer("ns/svc/80", time.Second), HealthCheck: &upstream.HealthCheckSpec{
		Timeout: 200 * time.Millisecond, Interval: time.Second, Path: "/healthz", Host: "svc.example.com",
		UnhealthyThreshold: 2, HealthyThreshold: 2, ReuseConnection: true, Expected: statuses(200, 201), Retriable: statuses(500, 503),
	}}
	hs := &upstream.HealthState{}
	hs.SetConfig(uc)
	cfg := hs.Config.Load()
	defer cfg.Transport.CloseIdleConnections()
	for _, tc := range []struct {
		status int32
		hang   bool
		addr   string
		want   upstream.CheckResult
	}{
		{status: 200, want: upstream.CheckResult{OK: true, Reason: "status 200"}},
		{status: 503, want: upstream.CheckResult{Immediate: true, Reason: "status 503"}},
		{status: 404, want: upstream.CheckResult{Immediate: true, Reason: "status 404"}},
		{status: 302, want: upstream.CheckResult{Immediate: true, Reason: "status 302"}}, // redirects are not followed
		{status: 500, want: upstream.CheckResult{Reason: "status 500"}},                  // retriable
		{hang: true, want: upstream.CheckResult{Reason: "timeout"}},
	} {
		b.status.Store(tc.status)
		b.hang.Store(tc.hang)
		if got := cfg.Check(context.Background(), b.addr()); got != tc.want {
			t.Errorf("status %d hang %v: %+v, want %+v", tc.status, tc.hang, got, tc.want)
		}
	}
	b.hang.Store(false)
	if got := cfg.Check(context.Background(), testutil.RefusedAddr(t)); got.OK || got.Immediate || !strings.HasPrefix(got.Reason, "connection error") {
		t.Errorf("closed port: %+v, want a connection error that counts towards the threshold", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.host != "svc.example.com" || b.ua != "Envoy/HC" {
		t.Errorf("Host %q User-Agent %q", b.host, b.ua)
	}
}

// TestHealthCheckPanicMode: when too few endpoints are healthy, Envoy sends
// traffic to all of them; with panic mode disabled only the healthy ones
// get traffic, and none healthy means 503.
func TestHealthCheckPanicMode(t *testing.T) {
	t.Parallel()
	bs := []*hcBackend{startHCBackend(t, "p0"), startHCBackend(t, "p1"), startHCBackend(t, "p2")}
	var addrs []string
	for _, b := range bs {
		addrs = append(addrs, b.addr())
	}
	cp := startControlPlane(t)
	panicCluster := hcCluster("panic", 50*time.Millisecond, 1, 1)
	strict := hcCluster("strict", 50*time.Millisecond, 1, 1)
	strict.CommonLbConfig = &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}}
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{panicCluster, strict},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("panic", addrs...), assignment("strict", addrs...)},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("panic", prefixMatch("/panic")), toCluster("strict", prefixMatch("/strict"))))},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	allHealthy := func(cluster string, want ...bool) func() bool {
		return func() bool {
			for i, b := range bs {
				if endpointHealthy(p, cluster, b.addr()) != want[i] {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "all healthy", func() bool {
		return allHealthy("panic", true, true, true)() && allHealthy("strict", true, true, true)()
	})

	bs[1].status.Store(500)
	bs[2].status.Store(500)
	waitFor(t, "p1 and p2 ejected", func() bool {
		return allHealthy("panic", true, false, false)() && allHealthy("strict", true, false, false)()
	})
	// One of three healthy (33%) is below the default 50% threshold.
	if seen := backendsOf(t, c, p.httpURL(t, "/panic"), 9); seen["p0"] != 3 || seen["p1"] != 3 || seen["p2"] != 3 {
		t.Errorf("in panic mode requests went to %v, want round robin over all three", seen)
	}
	if seen := backendsOf(t, c, p.httpURL(t, "/strict"), 9); seen["p0"] != 9 {
		t.Errorf("with panic mode disabled requests went to %v, want all to the healthy p0", seen)
	}
	bs[0].status.Store(500)
	waitFor(t, "all ejected", func() bool { return allHealthy("strict", false, false, false)() })
	if r := get(t, c, p.httpURL(t, "/strict"), "x", nil); r.Status != 503 || r.Body != "no healthy upstream" {
		t.Errorf("no healthy endpoint, panic disabled: got %d %q, want 503 no healthy upstream", r.Status, r.Body)
	}
	if r := get(t, c, p.httpURL(t, "/panic"), "x", nil); r.Status != 200 {
		t.Errorf("no healthy endpoint, panic mode: got %d, want traffic to all endpoints", r.Status)
	}
}

// TestHealthCheckersStop: checkers stop with their endpoint, their cluster
// and the proxy; no_traffic_interval applies until the first request.
func TestHealthCheckersStop(t *testing.T) {
	t.Parallel()
	a, b := startHCBackend(t, "a"), startHCBackend(t, "b")
	cp := startControlPlane(t)
	hc := hcCluster("hc", time.Hour, 1, 1)
	hc.HealthChecks[0].NoTrafficInterval = durationpb.New(20 * time.Millisecond)
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{hc, edsCluster("plain")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("hc", a.addr(), b.addr()), assignment("plain", a.addr())},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("hc", prefixMatch("/hc")), toCluster("plain", prefixMatch("/"))))},
	}
	cp.set("v1", res)

	// A proxy of its own, to watch Run return.
	logs := &logCapture{}
	reg := prometheus.NewRegistry()
	p := New(Config{
		XDSAddress: cp.addr, NodeID: testNode, ListenerAddrs: map[string]string{"ingress_http": "127.0.0.1:0"},
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Registerer: reg,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		cancel()
		if !stopped {
			<-done
		}
		if t.Failed() {
			t.Logf("proxy log:\n%s", logs.String())
		}
	})
	waitFor(t, "ready", p.Ready)
	tp := &testProxy{Proxy: p, logs: logs, reg: reg}
	waitFor(t, "two checkers", func() bool { return p.healthCheckers.Load() == 2 })

	t.Run("no_traffic_interval until the first request", func(t *testing.T) {
		n := a.checks.Load()
		waitFor(t, "checks every 20ms without traffic", func() bool { return a.checks.Load() >= n+3 })
		get(t, noRedirectClient(), tp.httpURL(t, "/hc"), "x", nil)
		// After the waits in progress (20ms), the next checks are an hour
		// away: nothing happens, which takes some waiting to see.
		time.Sleep(300 * time.Millisecond)
		n = a.checks.Load() + b.checks.Load()
		time.Sleep(300 * time.Millisecond)
		if m := a.checks.Load() + b.checks.Load(); m != n {
			t.Errorf("%d checks in 300ms after the cluster had traffic, want none (interval 1h)", m-n)
		}
	})
	t.Run("removed endpoint", func(t *testing.T) {
		next := res
		next.endpoints = []*endpointv3.ClusterLoadAssignment{assignment("hc", a.addr()), assignment("plain", a.addr())}
		cp.set("v2", next)
		waitFor(t, "one checker", func() bool { return p.healthCheckers.Load() == 1 })
	})
	t.Run("health checks removed from the cluster", func(t *testing.T) {
		next := res
		next.clusters = []*clusterv3.Cluster{edsCluster("hc"), edsCluster("plain")}
		cp.set("v3", next)
		waitFor(t, "no checker", func() bool { return p.healthCheckers.Load() == 0 })
		if _, ok := gaugeValue(t, tp, "portico_proxy_cluster_healthy_endpoints", "hc"); ok {
			t.Error("gauge of a cluster without health checks still exported")
		}
	})
	t.Run("removed cluster", func(t *testing.T) {
		cp.set("v4", res)
		waitFor(t, "two checkers again", func() bool { return p.healthCheckers.Load() == 2 })
		next := res
		next.clusters = []*clusterv3.Cluster{edsCluster("plain")}
		next.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("plain", prefixMatch("/"))))}
		cp.set("v5", next)
		waitFor(t, "no checker", func() bool { return p.healthCheckers.Load() == 0 })
	})
	t.Run("proxy shutdown", func(t *testing.T) {
		cp.set("v6", res)
		waitFor(t, "two checkers again", func() bool { return p.healthCheckers.Load() == 2 })
		cancel()
		select {
		case err := <-done:
			stopped = true
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return")
		}
		if n := p.healthCheckers.Load(); n != 0 {
			t.Errorf("%d checkers still running after Run returned", n)
		}
	})
}

// TestHealthCheckExpectedStatuses: expected_statuses replaces the default
// 200-only expectation; a status outside it (and outside retriable_statuses)
// ejects at once.
func TestHealthCheckExpectedStatuses(t *testing.T) {
	t.Parallel()
	a, b := startHCBackend(t, "a"), startHCBackend(t, "b")
	a.status.Store(204)
	cp := startControlPlane(t)
	only204 := hcCluster("only204", 50*time.Millisecond, 3, 1)
	only204.HealthChecks[0].GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 204, End: 205}}
	twoxx := hcCluster("2xx", 50*time.Millisecond, 3, 1)
	twoxx.HealthChecks[0].GetHttpHealthCheck().ExpectedStatuses = []*typev3.Int64Range{{Start: 200, End: 300}}
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{only204, twoxx, hcCluster("default", 50*time.Millisecond, 3, 1)},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("only204", a.addr(), b.addr()),
			assignment("2xx", a.addr(), b.addr()), assignment("default", a.addr(), b.addr())},
		routes: []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
			toCluster("only204", separatedMatch("/only204")), toCluster("2xx", separatedMatch("/2xx")),
			toCluster("default", separatedMatch("/default"))))},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, tc := range []struct {
		cluster string
		a, b    bool // healthy
	}{{"only204", true, false}, {"2xx", true, true}, {"default", false, true}} {
		waitFor(t, tc.cluster+" checked", func() bool {
			return endpointHealthy(p, tc.cluster, a.addr()) == tc.a && endpointHealthy(p, tc.cluster, b.addr()) == tc.b
		})
		seen := backendsOf(t, c, p.httpURL(t, "/"+tc.cluster), 6)
		want := map[string]int{"a": 3, "b": 3}
		switch {
		case !tc.a:
			want = map[string]int{"b": 6}
		case !tc.b:
			want = map[string]int{"a": 6}
		}
		if diff := cmp.Diff(want, seen); diff != "" {
			t.Errorf("%s: requests went to (-want +got):\n%s", tc.cluster, diff)
		}
	}
}

// TestTCPHealthCheck: a tcp_health_check without send/receive only connects:
// an endpoint accepting connections is healthy whatever it answers, one
// refusing them is ejected after unhealthy_threshold failures.
func TestTCPHealthCheck(t *testing.T) {
	t.Parallel()
	a, b := startHCBackend(t, "a"), startHCBackend(t, "b")
	a.status.Store(500) // HTTP checks would fail; connecting succeeds
	cp := startControlPlane(t)
	tcp := hcCluster("tcp", 50*time.Millisecond, 2, 1)
	tcp.HealthChecks[0].HealthChecker = &corev3.HealthCheck_TcpHealthCheck_{TcpHealthCheck: &corev3.HealthCheck_TcpHealthCheck{}}
	res := resources{
		listeners: []*listenerv3.Listener{httpListener(t)},
		clusters:  []*clusterv3.Cluster{tcp},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("tcp", a.addr(), b.addr())},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("tcp", prefixMatch("/"))))},
	}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	waitFor(t, "both healthy", func() bool { return endpointHealthy(p, "tcp", a.addr()) && endpointHealthy(p, "tcp", b.addr()) })
	if n := a.checks.Load() + b.checks.Load(); n != 0 {
		t.Errorf("%d HTTP requests sent by a connect-only check", n)
	}
	addr := b.addr()
	b.srv.Close()
	waitFor(t, "b ejected once it refuses connections", func() bool { return !endpointHealthy(p, "tcp", addr) })
	if seen := backendsOf(t, noRedirectClient(), p.httpURL(t, "/"), 4); seen["a"] != 4 {
		t.Errorf("requests went to %v, want all to a", seen)
	}
	found := false
	for _, rec := range p.logs.records("health check transition") {
		reason, _ := rec["reason"].(string)
		found = found || (rec["endpoint"] == addr && rec["healthy"] == false && strings.HasPrefix(reason, "connection error"))
	}
	if !found {
		t.Error("no transition logged for b's refused connections")
	}
}

// statuses is the upstream.StatusSet of [from, to) ranges given in pairs.
func statuses(bounds ...int) upstream.StatusSet {
	var s upstream.StatusSet
	for i := 0; i < len(bounds); i += 2 {
		for c := bounds[i]; c < bounds[i+1]; c++ {
			s.Add(c)
		}
	}
	return s
}
