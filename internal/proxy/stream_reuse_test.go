package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// An HTTP/1.1 connection keeps a request's stream (exchange, target, filter
// stream) for its next request once nothing holds it. Each request that
// leaves something holding its stream after the response (a body still
// written upstream, a retry, a timer that went off, a mirror) is followed on
// the same connection by plain requests, which must get their own answer,
// headers and access log line; under -race, a stream reused while something
// still held it is a data race. The two paths are the codec's, in clear text
// and over TLS (HTTP/2 keeps no stream).
func TestCodecStreamReusedOnlyWhenQuiet(t *testing.T) {
	t.Parallel()
	var flaky atomic.Int64
	be := startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/flaky") && flaky.Add(1)%2 == 1:
			w.WriteHeader(http.StatusServiceUnavailable) // the first attempt; the retry succeeds
			return
		case strings.HasPrefix(r.URL.Path, "/stall"):
			select { // until the proxy gives up on the request
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		case strings.HasPrefix(r.URL.Path, "/early"):
			w.Header().Set("Connection", "close") // answers before reading the body
			fmt.Fprint(w, "early "+r.URL.Path)
			return
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	})
	tagged := toCluster("be", prefixMatch("/tagged"))
	tagged.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-tag", "tagged")}
	p := startCodecProxy(t, map[string]string{"be": be.srv.Listener.Addr().String()}, nil, vhost("*",
		withAction(toCluster("be", prefixMatch("/flaky")), func(a *routev3.RouteAction) {
			a.RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(1)}
		}),
		withAction(toCluster("be", prefixMatch("/stall-route")), func(a *routev3.RouteAction) {
			a.Timeout = durationpb.New(50 * time.Millisecond)
		}),
		withAction(toCluster("be", prefixMatch("/stall-idle")), func(a *routev3.RouteAction) {
			a.IdleTimeout = durationpb.New(50 * time.Millisecond)
		}),
		withAction(toCluster("be", prefixMatch("/mirrored")), func(a *routev3.RouteAction) {
			a.RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{Cluster: "be"}}
		}),
		tagged,
		toCluster("be", prefixMatch("/")),
	))
	steps := []struct {
		name, request string
		status        int
		body          string // the response body's start; "" for any
	}{
		{"plain", "GET /plain/1 HTTP/1.1\r\nHost: x\r\n\r\n", 200, "GET /plain/1 "},
		{"with a body", "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 200, "POST /echo hello"},
		{"chunked body", "POST /echo2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 200, "POST /echo2 abc"},
		{"retried", "GET /flaky HTTP/1.1\r\nHost: x\r\n\r\n", 200, "GET /flaky "},
		{"route timeout", "GET /stall-route HTTP/1.1\r\nHost: x\r\n\r\n", 504, ""},
		{"idle timeout", "GET /stall-idle HTTP/1.1\r\nHost: x\r\n\r\n", 408, ""},
		{"mirrored", "GET /mirrored HTTP/1.1\r\nHost: x\r\n\r\n", 200, "GET /mirrored "},
		{"route headers", "GET /tagged HTTP/1.1\r\nHost: x\r\n\r\n", 200, "GET /tagged "},
		{"early answer", "POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", 200, "early /early"},
		{"refused upgrade", "GET /plain HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", 403, ""},
	}
	for _, rp := range p.rawPaths() {
		t.Run(rp.name, func(t *testing.T) {
			conn, br := rp.dial(t)
			n := 0
			plain := func(after string) {
				t.Helper()
				for range 3 {
					n++
					path := fmt.Sprintf("/plain/%s/%d", rp.name, n)
					resp, body := rawRequest(t, conn, br, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
					if resp.StatusCode != 200 || body != "GET "+path+" " || resp.Header.Get("X-Tag") != "" {
						t.Fatalf("after %s: %s answered %d %q (x-tag %q)", after, path, resp.StatusCode, body, resp.Header.Get("X-Tag"))
					}
					if line := requestLineOf(t, p.testProxy, path); line["status"] != float64(200) || line["attempts"] != float64(1) {
						t.Errorf("after %s: the access log line of %s is %v", after, path, line)
					}
				}
			}
			plain("the connection's start")
			for _, s := range steps {
				resp, body := rawRequest(t, conn, br, s.request)
				if resp.StatusCode != s.status || !strings.HasPrefix(body, s.body) {
					t.Fatalf("%s: %d %q, want %d %q", s.name, resp.StatusCode, body, s.status, s.body)
				}
				if (s.name == "route headers") != (resp.Header.Get("X-Tag") == "tagged") {
					t.Fatalf("%s: x-tag %q", s.name, resp.Header.Get("X-Tag"))
				}
				if resp.Close {
					conn, br = rp.dial(t)
				}
				plain(s.name)
			}
		})
	}
}
