package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestIdleTimeout: the stream idle timeout (HCM stream_idle_timeout,
// overridden by the route's idle_timeout) fires when neither side moves:
// 408 before the response head, a reset after it.
func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	// ?sleep delays the head; ?chunks streams that many chunks, ?gap apart.
	b := startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if d, err := time.ParseDuration(q.Get("sleep")); err == nil {
			sleepUntilCancelled(r, d)
		}
		if strings.HasPrefix(r.URL.Path, "/upload") {
			n, _ := io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "uploaded "+strconv.FormatInt(n, 10))
			return
		}
		gap, _ := time.ParseDuration(q.Get("gap"))
		chunks := len(q.Get("chunks"))
		w.WriteHeader(200)
		for i := range chunks {
			if i > 0 {
				sleepUntilCancelled(r, gap)
			}
			_, _ = io.WriteString(w, "chunk;")
			http.NewResponseController(w).Flush()
		}
	})
	cp := startControlPlane(t)
	var res resources
	res.clusters = append(res.clusters, edsCluster("idle"))
	res.endpoints = append(res.endpoints, assignment("idle", b.addr()))
	// The HCM's stream idle timeout is 200ms; routes override it.
	res.listeners = []*listenerv3.Listener{modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		h.StreamIdleTimeout = durationpb.New(200 * time.Millisecond)
	})}
	idle := func(prefix string, d *durationpb.Duration) *routev3.Route {
		return withAction(toCluster("idle", separatedMatch(prefix)), func(a *routev3.RouteAction) { a.IdleTimeout = d })
	}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*",
		idle("/hcm", nil),
		idle("/short", durationpb.New(100*time.Millisecond)),
		idle("/long", durationpb.New(1500*time.Millisecond)),
		idle("/steady", durationpb.New(600*time.Millisecond)),
		idle("/disabled", durationpb.New(0)),
		// 20 times the slow upload's gap: a loaded machine must not make it look stalled.
		idle("/upload", durationpb.New(time.Second)),
	))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()

	// Timers never fire early, so the minimum durations are exact; the
	// maximums leave room for a loaded machine.
	tests := []struct {
		name        string
		path        string
		wantStatus  int
		wantBody    string
		min         time.Duration
		wantAborted bool
	}{
		{name: "HCM stream_idle_timeout: 408 while waiting for the head", path: "/hcm/?sleep=3s",
			wantStatus: 408, wantBody: "stream timeout", min: 200 * time.Millisecond},
		{name: "a shorter route idle_timeout", path: "/short/?sleep=3s",
			wantStatus: 408, wantBody: "stream timeout", min: 100 * time.Millisecond},
		{name: "a longer route idle_timeout overrides the HCM's", path: "/long/?sleep=600ms",
			wantStatus: 200, min: 600 * time.Millisecond},
		{name: "0s disables it", path: "/disabled/?sleep=600ms",
			wantStatus: 200, min: 600 * time.Millisecond},
		{name: "activity keeps the stream alive", path: "/steady/?chunks=xxxxxxxxxx&gap=100ms",
			wantStatus: 200, wantBody: strings.Repeat("chunk;", 10), min: 900 * time.Millisecond},
		{name: "idle after the head: reset", path: "/short/?chunks=xx&gap=3s",
			wantStatus: 200, wantAborted: true, min: 100 * time.Millisecond},
	}
	t.Run("requests", func(t *testing.T) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				req, _ := http.NewRequest(http.MethodGet, p.httpURL(t, tc.path), nil)
				start := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				elapsed := time.Since(start)
				if resp.StatusCode != tc.wantStatus {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.wantStatus)
				}
				if tc.wantAborted {
					if err == nil {
						t.Errorf("body read %q completely, want the stream reset", body)
					}
				} else if err != nil || !strings.Contains(string(body), tc.wantBody) {
					t.Errorf("body %q (%v), want %q", body, err, tc.wantBody)
				}
				if elapsed < tc.min || elapsed > 2500*time.Millisecond {
					t.Errorf("took %v, want at least %v (and well under the backend's 3s)", elapsed, tc.min)
				}
			})
		}
		t.Run("stalled upload: 408", func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", p.ListenerAddr("ingress_http"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			// Ten of the hundred announced bytes, then nothing.
			if _, err := io.WriteString(conn, "POST /upload/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no response to a stalled upload: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 408 || string(body) != "stream timeout" {
				t.Errorf("got %d %q, want 408 stream timeout", resp.StatusCode, body)
			}
		})
		t.Run("slow but steady upload", func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(http.MethodPost, p.httpURL(t, "/upload/y"), &slowBody{n: 10, size: 10, interval: 50 * time.Millisecond})
			req.ContentLength = -1
			r := do(t, c, req)
			if r.Status != 200 || r.Body != "uploaded 100" {
				t.Errorf("got %d %q, want the upload to go through", r.Status, r.Body)
			}
		})
	})
	t.Run("access log", func(t *testing.T) {
		// Lines are written off the request path: wait for it.
		waitFor(t, "an access log line with status 408", func() bool {
			for _, rec := range p.logs.records("access") {
				if rec["status"] == float64(408) && rec["upstream_cluster"] == "idle" {
					return true
				}
			}
			return false
		})
	})
}
