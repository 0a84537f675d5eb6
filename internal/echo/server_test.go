package echo

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
	"time"
)

// startServer starts an echo server on a random loopback port and stops it
// when the test ends.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	s := New(cfg)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return s
}

// do sends req with client and returns the response with its body read.
func do(t *testing.T, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, body
}

func newRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func decode(t *testing.T, body []byte) Response {
	t.Helper()
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("decoding %q: %v", body, err)
	}
	return r
}

func TestResponseFields(t *testing.T) {
	s := startServer(t, Config{Service: "web", Namespace: "shop"})

	req := newRequest(t, http.MethodPut, "http://"+s.Addr()+"/a%2Fb/c%20d?x=1&y=%2F")
	req.Host = "shop.example.com"
	req.Header.Add("x-multi", "one")
	req.Header.Add("X-Multi", "two")
	req.Header.Set("User-Agent", "echo-test")
	resp, body := do(t, http.DefaultClient, req)

	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200; body %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	got := decode(t, body)
	want := Response{
		Service:   "web",
		Namespace: "shop",
		Endpoint:  s.Addr(),
		Path:      "/a%2Fb/c%20d",
		Query:     "x=1&y=%2F",
		Host:      "shop.example.com",
		Method:    http.MethodPut,
		Proto:     "HTTP/1.1",
		TLS:       false,
	}
	headers := got.Headers
	got.Headers = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("response =\n%+v\nwant\n%+v", got, want)
	}
	if v := headers["X-Multi"]; !reflect.DeepEqual(v, []string{"one", "two"}) {
		t.Errorf("headers[X-Multi] = %q, want [one two]", v)
	}
	if v := headers["User-Agent"]; !reflect.DeepEqual(v, []string{"echo-test"}) {
		t.Errorf("headers[User-Agent] = %q, want [echo-test]", v)
	}
	for name := range headers {
		if name != textproto.CanonicalMIMEHeaderKey(name) {
			t.Errorf("header name %q is not canonical", name)
		}
	}
}

// TestJSONKeys pins the wire names external tests decode.
func TestJSONKeys(t *testing.T) {
	s := startServer(t, Config{Service: "web"})
	_, body := do(t, http.DefaultClient, newRequest(t, http.MethodGet, "http://"+s.Addr()+"/"))

	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"service", "namespace", "endpoint", "path", "host", "method", "proto", "headers", "query", "tls"} {
		if _, ok := m[key]; !ok {
			t.Errorf("body lacks key %q: %s", key, body)
		}
	}
	if m["namespace"] != DefaultNamespace {
		t.Errorf("namespace = %v, want %q", m["namespace"], DefaultNamespace)
	}
	if m["tls"] != false {
		t.Errorf("tls = %v, want false", m["tls"])
	}
}

func TestPortZeroEndpoint(t *testing.T) {
	s := startServer(t, Config{Listen: "127.0.0.1:0", Service: "web"})

	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatalf("Addr %q: %v", s.Addr(), err)
	}
	if host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr = %q, want 127.0.0.1 with a real port", s.Addr())
	}
	_, body := do(t, http.DefaultClient, newRequest(t, http.MethodGet, "http://"+s.Addr()+"/"))
	if got := decode(t, body).Endpoint; got != s.Addr() {
		t.Errorf("endpoint = %q, want %q", got, s.Addr())
	}
}

func TestH2C(t *testing.T) {
	s := startServer(t, Config{Service: "grpc-ish"})

	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	req := newRequest(t, http.MethodPost, "http://"+s.Addr()+"/svc.Echo/Call?q=1")
	req.Host = "h2.example.com"
	resp, body := do(t, client, req)
	if resp.ProtoMajor != 2 {
		t.Fatalf("response proto = %s, want HTTP/2", resp.Proto)
	}
	got := decode(t, body)
	if got.Proto != "HTTP/2.0" || got.Host != "h2.example.com" || got.Path != "/svc.Echo/Call" || got.Query != "q=1" || got.Method != http.MethodPost {
		t.Errorf("h2c response = %+v", got)
	}
}

func TestStatusHeader(t *testing.T) {
	s := startServer(t, Config{Service: "web"})
	for _, tc := range []struct {
		header   string
		want     int
		wantBody bool
	}{
		{"201", 201, true},
		{"404", 404, true},
		{"503", 503, true},
		{"599", 599, true},
		{"204", 204, false},
		{"304", 304, false},
	} {
		t.Run(tc.header, func(t *testing.T) {
			req := newRequest(t, http.MethodGet, "http://"+s.Addr()+"/status")
			req.Header.Set(HeaderStatus, tc.header)
			resp, body := do(t, http.DefaultClient, req)
			if resp.StatusCode != tc.want {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.want)
			}
			if !tc.wantBody {
				if len(body) != 0 {
					t.Errorf("body = %q, want none for %d", body, tc.want)
				}
				return
			}
			if got := decode(t, body); got.Path != "/status" || got.Service != "web" {
				t.Errorf("body = %+v", got)
			}
		})
	}
}

// TestInformationalStatus checks that a 1xx is sent as an interim response
// followed by the normal 200 echo.
func TestInformationalStatus(t *testing.T) {
	s := startServer(t, Config{Service: "web"})

	var interim []int
	trace := &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			interim = append(interim, code)
			return nil
		},
	}
	req := newRequest(t, http.MethodGet, "http://"+s.Addr()+"/hints")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	req.Header.Set(HeaderStatus, "103")
	resp, body := do(t, http.DefaultClient, req)

	if resp.StatusCode != http.StatusOK {
		t.Fatalf("final status = %d, want 200", resp.StatusCode)
	}
	if !reflect.DeepEqual(interim, []int{103}) {
		t.Errorf("interim responses = %v, want [103]", interim)
	}
	if got := decode(t, body); got.Path != "/hints" {
		t.Errorf("body = %+v", got)
	}
}

func TestInvalidHeaders(t *testing.T) {
	s := startServer(t, Config{Service: "web"})
	for _, tc := range []struct {
		name, header, value, reason string
	}{
		{"status not a number", HeaderStatus, "abc", "not an integer"},
		{"status too small", HeaderStatus, "99", "outside 100..599"},
		{"status too large", HeaderStatus, "600", "outside 100..599"},
		{"status 101", HeaderStatus, "101", "Switching Protocols"},
		{"delay not a duration", HeaderDelay, "soon", "not a Go duration"},
		{"delay without unit", HeaderDelay, "250", "not a Go duration"},
		{"delay negative", HeaderDelay, "-1s", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, http.MethodGet, "http://"+s.Addr()+"/")
			req.Header.Set(tc.header, tc.value)
			resp, body := do(t, http.DefaultClient, req)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400", resp.StatusCode)
			}
			msg := string(body)
			if !strings.Contains(msg, tc.header) || !strings.Contains(msg, tc.reason) {
				t.Errorf("body = %q, want it to name %s and say %q", msg, tc.header, tc.reason)
			}
		})
	}
}

// TestInvalidDelayFailsFast checks validation happens before any waiting.
func TestInvalidDelayFailsFast(t *testing.T) {
	s := startServer(t, Config{Service: "web"})
	req := newRequest(t, http.MethodGet, "http://"+s.Addr()+"/")
	req.Header.Set(HeaderDelay, "30s")
	req.Header.Set(HeaderStatus, "nope")
	start := time.Now()
	resp, _ := do(t, http.DefaultClient, req)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", resp.StatusCode)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("took %v; invalid request should not wait", elapsed)
	}
}

func TestDelay(t *testing.T) {
	s := startServer(t, Config{Service: "web"})
	req := newRequest(t, http.MethodGet, "http://"+s.Addr()+"/slow")
	req.Header.Set(HeaderDelay, "250ms")
	req.Header.Set(HeaderStatus, "202")

	start := time.Now()
	resp, body := do(t, http.DefaultClient, req)
	if elapsed := time.Since(start); elapsed < 250*time.Millisecond {
		t.Errorf("answered after %v, want >= 250ms", elapsed)
	}
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("status = %d, want 202", resp.StatusCode)
	}
	if got := decode(t, body); got.Path != "/slow" {
		t.Errorf("body = %+v", got)
	}
}

func TestParseDelayCaps(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"0s":    0,
		"250ms": 250 * time.Millisecond,
		"60s":   MaxDelay,
		"2m":    MaxDelay,
		"1h":    MaxDelay,
	} {
		got, err := parseDelay(in)
		if err != nil || got != want {
			t.Errorf("parseDelay(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// TestDelayAbortedWhenClientLeaves drives the handler directly so the test
// can observe that it returns as soon as the request context ends.
func TestDelayAbortedWhenClientLeaves(t *testing.T) {
	h := &handler{service: "web", namespace: "default", endpoint: "x", log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	req.Header.Set(HeaderDelay, "60s")
	rec := httptest.NewRecorder()

	returned := make(chan struct{})
	go func() {
		defer close(returned)
		h.ServeHTTP(rec, req)
	}()
	time.Sleep(20 * time.Millisecond) // let it start waiting; correctness does not depend on it
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("handler still waiting after the client went away")
	}
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want 503", rec.Code)
	}
}

// signalHandler is a slog.Handler that reports records with a given message,
// letting tests wait until the server reached a point without sleeping.
type signalHandler struct {
	msg string
	ch  chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h signalHandler) WithGroup(string) slog.Handler            { return h }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}

func TestShutdownAbortsDelayedRequest(t *testing.T) {
	delaying := make(chan struct{}, 1)
	s := New(Config{
		Listen:  "127.0.0.1:0",
		Service: "web",
		Logger:  slog.New(signalHandler{msg: "delaying echo response", ch: delaying}),
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}

	type result struct {
		status int
		err    error
	}
	results := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, "http://"+s.Addr()+"/", nil)
		req.Header.Set(HeaderDelay, "60s")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			results <- result{err: err}
			return
		}
		resp.Body.Close()
		results <- result{status: resp.StatusCode}
	}()
	<-delaying

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Shutdown took %v; delayed requests should be aborted", elapsed)
	}
	r := <-results
	if r.err != nil || r.status != http.StatusServiceUnavailable {
		t.Errorf("delayed request got status %d, err %v; want 503", r.status, r.err)
	}
}

func TestRun(t *testing.T) {
	s := New(Config{Listen: "127.0.0.1:0", Service: "web"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Run(ctx) }()

	addr := waitForAddr(t, s)
	resp, body := do(t, http.DefaultClient, newRequest(t, http.MethodGet, "http://"+addr+"/run"))
	if resp.StatusCode != http.StatusOK || decode(t, body).Path != "/run" {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
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

func waitForAddr(t *testing.T, s *Server) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if a := s.Addr(); a != "" {
			return a
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("server never bound")
	return ""
}

func TestRunListenError(t *testing.T) {
	taken := startServer(t, Config{Service: "first"})
	err := New(Config{Listen: taken.Addr(), Service: "second"}).Run(context.Background())
	if err == nil {
		t.Fatal("Run on a taken port succeeded")
	}
}

func TestStartTwice(t *testing.T) {
	s := startServer(t, Config{Service: "web"})
	if err := s.Start(); err == nil {
		t.Fatal("second Start succeeded")
	}
}

func TestShutdownUnstarted(t *testing.T) {
	if err := New(Config{}).Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown of unstarted server: %v", err)
	}
	if a := New(Config{}).Addr(); a != "" {
		t.Fatalf("Addr before Start = %q, want empty", a)
	}
}

// TestEscapedPathKept documents the Path contract: escapes are kept as sent,
// including those net/http would otherwise decode.
func TestEscapedPathKept(t *testing.T) {
	h := &handler{log: slog.New(slog.DiscardHandler)}
	for _, p := range []string{"/plain", "/a%2Fb", "/caf%C3%A9", "/%41"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p+"?k=v", nil))
		got := decode(t, rec.Body.Bytes())
		if got.Path != p || got.Query != "k=v" {
			t.Errorf("path %q: got path %q query %q", p, got.Path, got.Query)
		}
	}
}
