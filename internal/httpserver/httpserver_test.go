package httpserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// okServer returns a NewServer func answering every request with "ok".
func okServer(string) *http.Server {
	return &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func shutdown(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestStartServeShutdown(t *testing.T) {
	var built string
	s := New(Config{Addr: "127.0.0.1:0", NewServer: func(addr string) *http.Server {
		built = addr
		return okServer(addr)
	}})
	if a := s.Addr(); a != "" {
		t.Fatalf("Addr before Start = %q, want empty", a)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	addr := s.Addr()
	if addr == "" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("Addr = %q, want the bound port", addr)
	}
	if built != addr {
		t.Errorf("NewServer got %q, want bound address %q", built, addr)
	}
	if code, body := get(t, "http://"+addr+"/"); code != 200 || body != "ok" {
		t.Errorf("GET = %d %q", code, body)
	}
	shutdown(t, s)
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Error("server still answering after Shutdown")
	}
	if a := s.Addr(); a != addr {
		t.Errorf("Addr after Shutdown = %q, want %q", a, addr)
	}
	shutdown(t, s) // a second Shutdown is harmless
}

func TestStartErrors(t *testing.T) {
	s := New(Config{Name: "demo", Addr: "127.0.0.1:0", NewServer: okServer})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)

	if err := s.Start(); err == nil || err.Error() != "demo: server already started" {
		t.Errorf("second Start = %v, want already started", err)
	}
	taken := New(Config{Name: "demo", Addr: s.Addr(), NewServer: okServer})
	err := taken.Start()
	if err == nil || !strings.HasPrefix(err.Error(), `demo: listen on "`+s.Addr()+`"`) {
		t.Errorf("Start on a taken port = %v, want a listen error", err)
	}
	if a := taken.Addr(); a != "" {
		t.Errorf("Addr after failed Start = %q, want empty", a)
	}
	if err := taken.Run(context.Background()); err == nil {
		t.Error("Run on a taken port succeeded")
	}
}

func TestDefaultName(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0", NewServer: okServer})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, s)
	if err := s.Start(); err == nil || !strings.HasPrefix(err.Error(), "httpserver: ") {
		t.Errorf("second Start = %v, want an httpserver: prefix", err)
	}
}

func TestShutdownUnstarted(t *testing.T) {
	called := false
	s := New(Config{NewServer: okServer, OnShutdown: func() { called = true }})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown of unstarted server: %v", err)
	}
	if called {
		t.Error("OnShutdown ran for an unstarted server")
	}
}

// blockingServer returns a NewServer func whose handler signals entered and
// then blocks until release is closed or the request context ends.
func blockingServer(entered chan<- struct{}, release <-chan struct{}) func(string) *http.Server {
	return func(string) *http.Server {
		return &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})}
	}
}

func TestOnShutdownAbortsRequests(t *testing.T) {
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	entered := make(chan struct{}, 1)
	s := New(Config{
		Addr: "127.0.0.1:0",
		NewServer: func(addr string) *http.Server {
			srv := blockingServer(entered, nil)(addr)
			srv.BaseContext = func(net.Listener) context.Context { return base }
			return srv
		},
		OnShutdown: func() {
			calls.Add(1)
			cancel()
		},
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := http.Get("http://" + s.Addr() + "/")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered

	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Shutdown took %v; OnShutdown should have aborted the request", elapsed)
	}
	if base.Err() == nil {
		t.Error("OnShutdown had not run when Shutdown returned")
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("OnShutdown ran %d times, want 1", n)
	}
}

func TestShutdownDeadlineClosesConnections(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	s := New(Config{Name: "demo", Addr: "127.0.0.1:0", NewServer: blockingServer(entered, release)})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	clientErr := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr() + "/")
		if err == nil {
			resp.Body.Close()
		}
		clientErr <- err
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "demo: shutdown: ") {
		t.Fatalf("Shutdown = %v, want a demo: shutdown: deadline error", err)
	}
	select {
	case err := <-clientErr:
		if err == nil {
			t.Error("blocked request succeeded; want its connection closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection still open after Shutdown gave up")
	}
}

func TestRun(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0", NewServer: okServer})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()

	addr := waitForAddr(t, s)
	if code, _ := get(t, "http://"+addr+"/"); code != 200 {
		t.Fatalf("GET = %d", code)
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
	if _, err := http.Get("http://" + addr + "/"); err == nil {
		t.Error("server still answering after Run returned")
	}
}

func TestRunShutdownTimeout(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	s := New(Config{
		Addr:            "127.0.0.1:0",
		NewServer:       blockingServer(entered, release),
		ShutdownTimeout: 50 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()
	addr := waitForAddr(t, s)
	go func() {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered

	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want the drain deadline error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run ignored ShutdownTimeout")
	}
}

// failingListener fails Accept permanently once fail is closed.
type failingListener struct {
	net.Listener
	fail chan struct{}
}

var errAccept = errors.New("accept exploded")

func (l failingListener) Accept() (net.Conn, error) {
	<-l.fail
	return nil, errAccept
}

func TestRunReportsServeError(t *testing.T) {
	fail := make(chan struct{})
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return failingListener{Listener: ln, fail: fail}, nil
	}
	s := New(Config{Name: "demo", Addr: "127.0.0.1:0", NewServer: okServer, Listen: listen})
	errc := make(chan error, 1)
	go func() { errc <- s.Run(context.Background()) }()
	waitForAddr(t, s)
	close(fail)
	select {
	case err := <-errc:
		if !errors.Is(err, errAccept) || !strings.HasPrefix(err.Error(), "demo: serve: ") {
			t.Fatalf("Run = %v, want the demo: serve: error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Serve failed")
	}
}

func waitForAddr(t *testing.T, s *Server) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if a := s.Addr(); a != "" {
			return a
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("server never bound")
	return ""
}

// TestShutdownClosesUnusedConnections: a connection that never sent a request
// (a client's spare dial) is closed as soon as shutdown begins, while a request
// in flight still finishes. net/http alone holds such a connection for five
// seconds, which made a 4-second drain fail with nothing in flight.
func TestShutdownClosesUnusedConnections(t *testing.T) {
	release := make(chan struct{})
	inHandler := make(chan struct{})
	accepted := make(chan struct{}, 4)
	s := New(Config{Addr: "127.0.0.1:0", NewServer: func(string) *http.Server {
		return &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				close(inHandler)
				<-release
				_, _ = io.WriteString(w, "done")
			}),
			ConnState: func(_ net.Conn, state http.ConnState) {
				if state == http.StateNew {
					accepted <- struct{}{}
				}
			},
		}
	}})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		body string
		err  error
	}
	inFlight := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + s.Addr())
		if err != nil {
			inFlight <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		inFlight <- result{string(b), err}
	}()
	<-inHandler
	<-accepted
	spare, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	<-accepted

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	if n, err := spare.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the unused connection read %d bytes, want it closed", n)
	}
	close(release)
	if r := <-inFlight; r.err != nil || r.body != "done" {
		t.Errorf("the request in flight: %q, %v; want it to finish", r.body, r.err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v, want a clean drain", err)
	}
}
