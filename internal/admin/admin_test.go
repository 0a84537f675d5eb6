package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// serve runs one request against h and returns status, headers and body.
func serve(t *testing.T, h http.Handler, method, path string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(method, path, nil)
	r.Host = "127.0.0.1:8090" // as a client of a loopback server sends it
	h.ServeHTTP(rec, r)
	return rec.Code, rec.Header(), rec.Body.String()
}

func TestHealthz(t *testing.T) {
	// Liveness must not depend on readiness.
	s := New(Config{Ready: func() (bool, string) { return false, "never" }})
	code, hdr, body := serve(t, s.Handler(), http.MethodGet, "/healthz")
	if code != http.StatusOK || body != "ok" {
		t.Fatalf("GET /healthz = %d %q, want 200 \"ok\"", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
}

func TestReadyzFollowsReadyFunc(t *testing.T) {
	var ready atomic.Bool
	s := New(Config{Ready: func() (bool, string) {
		if ready.Load() {
			return true, ""
		}
		return false, "waiting for initial sync of routes"
	}})

	code, _, body := serve(t, s.Handler(), http.MethodGet, "/readyz")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("before ready: status = %d, want 503", code)
	}
	if !strings.Contains(body, "waiting for initial sync of routes") {
		t.Errorf("before ready: body = %q, want the reason", body)
	}

	ready.Store(true)
	code, _, body = serve(t, s.Handler(), http.MethodGet, "/readyz")
	if code != http.StatusOK || body != "ready" {
		t.Fatalf("after ready: GET /readyz = %d %q, want 200 \"ready\"", code, body)
	}
}

func TestReadyzWithoutReason(t *testing.T) {
	s := New(Config{Ready: func() (bool, string) { return false, "" }})
	code, _, body := serve(t, s.Handler(), http.MethodGet, "/readyz")
	if code != http.StatusServiceUnavailable || body != "not ready" {
		t.Fatalf("GET /readyz = %d %q, want 503 \"not ready\"", code, body)
	}
}

func TestNilReadyMeansReady(t *testing.T) {
	code, _, body := serve(t, New(Config{}).Handler(), http.MethodGet, "/readyz")
	if code != http.StatusOK || body != "ready" {
		t.Fatalf("GET /readyz = %d %q, want 200 \"ready\"", code, body)
	}
}

func TestMetrics(t *testing.T) {
	reg := NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "portico_test_requests_total",
		Help: "Requests seen by the test.",
	})
	reg.MustRegister(requests)
	requests.Add(3)

	code, hdr, body := serve(t, New(Config{Registry: reg}).Handler(), http.MethodGet, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics = %d, body %q", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want the text exposition format", ct)
	}
	for _, want := range []string{
		"portico_test_requests_total 3",
		"go_goroutines ",
		"process_cpu_seconds_total ",
		"promhttp_metric_handler_errors_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestRegistryShared checks that two servers on one registry do not clash
// over the handler's own error counter.
func TestRegistryShared(t *testing.T) {
	reg := NewRegistry()
	for range 2 {
		code, _, _ := serve(t, New(Config{Registry: reg}).Handler(), http.MethodGet, "/metrics")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics = %d", code)
		}
	}
}

func TestNewRegistry(t *testing.T) {
	families, err := NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var goSeen, processSeen bool
	for _, f := range families {
		goSeen = goSeen || strings.HasPrefix(f.GetName(), "go_")
		processSeen = processSeen || strings.HasPrefix(f.GetName(), "process_")
	}
	if !goSeen || !processSeen {
		t.Errorf("go collector seen %v, process collector seen %v; want both", goSeen, processSeen)
	}
}

func TestNotFound(t *testing.T) {
	h := New(Config{}).Handler()
	for _, path := range []string{"/", "/nope", "/healthz/", "/metrics/extra", "/readyz/x"} {
		if code, _, _ := serve(t, h, http.MethodGet, path); code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, code)
		}
	}
}

func TestAdminServesNoProfiles(t *testing.T) {
	h := New(Config{}).Handler()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline"} {
		if code, _, _ := serve(t, h, http.MethodGet, path); code != http.StatusNotFound {
			t.Errorf("admin GET %s = %d, want 404: profiles are only on --pprof-addr", path, code)
		}
	}
}

func TestProfilesOnLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.1.2.3:6060", "[::]:6060", "example.com:6060", "nonsense"} {
		if _, err := NewProfiling(addr, nil); err == nil {
			t.Errorf("NewProfiling(%q) accepted a non-loopback address", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		if err := CheckLoopback(addr); err != nil {
			t.Errorf("CheckLoopback(%q) = %v, want nil", addr, err)
		}
	}
	p, err := NewProfiling("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := p.Handler()
	if code, _, _ := serve(t, h, http.MethodGet, "/metrics"); code != http.StatusNotFound {
		t.Errorf("the profiling server serves /metrics (%d)", code)
	}
	code, _, body := serve(t, h, http.MethodGet, "/debug/pprof/")
	if code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("GET /debug/pprof/ = %d %q, want 200 with the profile index", code, body)
	}
	code, _, body = serve(t, h, http.MethodGet, "/debug/pprof/goroutine?debug=1")
	if code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine = %d %q, want a goroutine profile", code, body)
	}
}

func TestMethods(t *testing.T) {
	h := New(Config{}).Handler()
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		// The recorder keeps HEAD bodies; TestRealListener checks they are dropped.
		if code, _, _ := serve(t, h, http.MethodHead, path); code != http.StatusOK {
			t.Errorf("HEAD %s = %d, want 200", path, code)
		}
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions} {
			code, hdr, _ := serve(t, h, method, path)
			if code != http.StatusMethodNotAllowed {
				t.Errorf("%s %s = %d, want 405", method, path, code)
			}
			if allow := hdr.Get("Allow"); !strings.Contains(allow, "GET") || !strings.Contains(allow, "HEAD") {
				t.Errorf("%s %s: Allow = %q, want GET and HEAD", method, path, allow)
			}
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestRealListener(t *testing.T) {
	var ready atomic.Bool
	s := New(Config{
		Addr:  "127.0.0.1:0",
		Ready: func() (bool, string) { return ready.Load(), "xDS not yet served" },
	})
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	base := "http://" + s.Addr()
	if strings.HasSuffix(s.Addr(), ":0") {
		t.Fatalf("Addr = %q, want the bound port", s.Addr())
	}

	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "xDS not yet served") {
		t.Errorf("/readyz before ready = %d %q", code, body)
	}
	ready.Store(true)
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready" {
		t.Errorf("/readyz after ready = %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics = %d, go_goroutines present: %v", code, strings.Contains(body, "go_goroutines"))
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Head(base + path)
		if err != nil {
			t.Fatalf("HEAD %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(body) != 0 {
			t.Errorf("HEAD %s = %d with %d body bytes, want 200 and none", path, resp.StatusCode, len(body))
		}
	}
	if code, _ := get(t, base+"/other"); code != 404 {
		t.Errorf("/other = %d, want 404", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("server still answering after Shutdown")
	}
}

func TestRun(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()

	addr := ""
	for deadline := time.Now().Add(5 * time.Second); addr == "" && time.Now().Before(deadline); {
		addr = s.Addr()
		time.Sleep(5 * time.Millisecond)
	}
	if addr == "" {
		t.Fatal("server never bound")
	}
	if code, _ := get(t, "http://"+addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestStartErrors(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	if err := s.Start(); err == nil {
		t.Error("second Start succeeded")
	}
	if err := New(Config{Addr: s.Addr()}).Run(context.Background()); err == nil {
		t.Error("Run on a taken port succeeded")
	}
}

func TestShutdownUnstarted(t *testing.T) {
	s := New(Config{})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown of unstarted server: %v", err)
	}
	if s.Addr() != "" {
		t.Fatalf("Addr before Start = %q, want empty", s.Addr())
	}
}

// TestStatusesRoute: GET /statuses is served by Config.Statuses, and only when one is
// given; other methods are refused.
func TestStatusesRoute(t *testing.T) {
	if code, _, _ := serve(t, New(Config{}).Handler(), http.MethodGet, "/statuses"); code != http.StatusNotFound {
		t.Errorf("without Statuses: GET /statuses = %d, want 404", code)
	}
	h := New(Config{Statuses: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "[]")
	})}).Handler()
	if code, _, body := serve(t, h, http.MethodGet, "/statuses"); code != http.StatusOK || body != "[]" {
		t.Errorf("GET /statuses = %d %q, want 200 from the handler", code, body)
	}
	if code, _, _ := serve(t, h, http.MethodPost, "/statuses"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /statuses = %d, want 405", code)
	}
}

// A server on loopback answers requests for loopback addresses and localhost only: a
// web page whose name its author makes resolve to 127.0.0.1 (DNS rebinding) must not
// read the run mode's statuses or the profiles through the user's browser.
func TestLoopbackServersRefuseOtherHosts(t *testing.T) {
	prof, err := NewProfiling("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Handler{"admin on loopback": New(Config{Addr: "127.0.0.1:8090"}).Handler(), "profiles": prof.Handler()} {
		for host, want := range map[string]int{
			"127.0.0.1:8090": 200, "localhost:8090": 200, "[::1]:8090": 200, "LOCALHOST": 200, "127.0.0.2": 200,
			"attacker.example:8090": 403, "attacker.example": 403, "10.0.0.1:8090": 403,
		} {
			path := "/healthz"
			if name == "profiles" {
				path = "/debug/pprof/"
			}
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.Host = host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != want {
				t.Errorf("%s, Host %s: %d, want %d", name, host, rec.Code, want)
			}
		}
	}
	// On a routable address (serve's 0.0.0.0:8000), probes and scrapers use the pod's IP.
	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	r.Host = "10.0.0.1:8000"
	rec := httptest.NewRecorder()
	New(Config{Addr: "0.0.0.0:8000"}).Handler().ServeHTTP(rec, r)
	if rec.Code != 200 {
		t.Errorf("admin on 0.0.0.0, Host 10.0.0.1:8000: %d, want 200", rec.Code)
	}
}
