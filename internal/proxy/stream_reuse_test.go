package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdstest"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// startStreamReuseProxy starts a proxy whose routes leave something holding a
// request's stream after its response: a retry (/flaky, whose first attempt
// per path fails), a route or idle timeout that goes off (/stall-route,
// /stall-idle), a mirror (/mirrored); /tagged adds a response header, and
// /trailers answers with a trailer (x-echo, the request's path), /declared
// with the header field x-echo (its path), declared a trailer too (with
// Server) but not sent as one. Others echo the method, path and body.
func startStreamReuseProxy(t *testing.T) *codecProxy {
	t.Helper()
	var attempts sync.Map // path: *atomic.Int64
	be := startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/flaky"):
			n, _ := attempts.LoadOrStore(r.URL.Path, new(atomic.Int64))
			if n.(*atomic.Int64).Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable) // the first attempt; the retry succeeds
				return
			}
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
		case strings.HasPrefix(r.URL.Path, "/trailers"):
			w.Header().Set("Trailer", "X-Echo")
			defer func() { w.Header().Set("X-Echo", r.URL.Path) }()
		case strings.HasPrefix(r.URL.Path, "/declared"):
			// Header fields also declared trailers, and no trailer sent: the
			// backend's own and the Server field the proxy sets.
			w.Header().Set("Trailer", "X-Echo, Server")
			w.Header().Set("X-Echo", r.URL.Path)
			defer w.Header().Del("X-Echo")
		}
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	})
	tagged := toCluster("be", prefixMatch("/tagged"))
	tagged.ResponseHeadersToAdd = []*corev3.HeaderValueOption{xdstest.Set("x-tag", "tagged")}
	return startCodecProxy(t, map[string]string{"be": be.srv.Listener.Addr().String()}, nil, vhost("*",
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
}

// An HTTP/1.1 connection keeps a request's stream (exchange, target, filter
// stream) for its next request once nothing holds it. Each request that
// leaves something holding its stream after the response (a body still
// written upstream, a retry, a timer that went off, a mirror) is followed on
// the same connection by plain requests, which must get their own answer,
// headers and access log line; under -race, a stream reused while something
// still held it is a data race. The two paths are the codec's, in clear text
// and over TLS (HTTP/2's streams: TestH2StreamsPooledOnlyWhenQuiet).
func TestCodecStreamReusedOnlyWhenQuiet(t *testing.T) {
	t.Parallel()
	p := startStreamReuseProxy(t)
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
				// Each path's first attempt at /flaky fails: a path of the
				// subtest's own has its retry on either path.
				s.request = strings.Replace(s.request, "/flaky", "/flaky/"+rp.name, 1)
				s.body = strings.Replace(s.body, "/flaky", "/flaky/"+rp.name, 1)
				resp, body := rawRequest(t, conn, br, s.request)
				if resp.StatusCode != s.status || !strings.HasPrefix(body, s.body) {
					t.Fatalf("%s: %d %q, want %d %q", s.name, resp.StatusCode, body, s.status, s.body)
				}
				if s.name == "retried" {
					if line := requestLineOf(t, p.testProxy, "/flaky/"+rp.name); line["attempts"] != float64(2) {
						t.Fatalf("retried: the access log line is %v, want 2 attempts", line)
					}
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

// step is a request of the stream reuse tests and what its answer must be.
type step struct {
	method, path, body string
	status             int
	want               string // the response body's start; "" for any
}

// checkReuseStep sends s on cp and reports what is wrong with its answer
// ("": nothing): its status and body, and no route header, trailer or
// header value but its own request's.
func checkReuseStep(cp codecPath, s step) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang, not a speed limit
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, s.method, cp.base+s.path, strings.NewReader(s.body))
	if err != nil {
		return err.Error()
	}
	resp, err := cp.client().Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		return "reading the body: " + err.Error()
	case resp.Proto != cp.proto:
		return "answered over " + resp.Proto
	case resp.StatusCode != s.status || !strings.HasPrefix(string(body), s.want):
		return fmt.Sprintf("%d %q, want %d %q", resp.StatusCode, body, s.status, s.want)
	case strings.HasPrefix(s.path, "/tagged") != (resp.Header.Get("X-Tag") == "tagged"):
		return fmt.Sprintf("x-tag %q", resp.Header.Get("X-Tag"))
	case strings.HasPrefix(s.path, "/trailers") && resp.Trailer.Get("X-Echo") != s.path:
		return fmt.Sprintf("trailer x-echo %q", resp.Trailer.Get("X-Echo"))
	case strings.HasPrefix(s.path, "/declared") && (resp.Header.Get("X-Echo") != s.path || len(resp.Trailer["X-Echo"]) > 1 ||
		resp.Trailer.Get("X-Echo") != "" && resp.Trailer.Get("X-Echo") != s.path):
		// Whether the header's value comes again as the trailer is the
		// proxy's choice; another request's value never is.
		return fmt.Sprintf("x-echo %q, trailer %q", resp.Header.Get("X-Echo"), resp.Trailer["X-Echo"])
	case !strings.HasPrefix(s.path, "/trailers") && !strings.HasPrefix(s.path, "/declared") && len(resp.Trailer) > 0:
		return fmt.Sprintf("trailers %v", resp.Trailer)
	}
	return ""
}

// HTTP/2 streams share a pool of streams (exchange, target, filter stream,
// rooms): a stream goes back once its request is over and nothing holds it.
// Clients on h2c and TLS each run streams at once on one connection, each
// sending requests that leave something holding their stream (a body, a
// retry, a timeout gone off, a mirror) between plain ones and ones answered
// with a header or a trailer of their own; each response must be its own
// request's, and each request must have its one access log line. Under
// -race, a stream taken from the pool while something still held it is a
// data race.
func TestH2StreamsPooledOnlyWhenQuiet(t *testing.T) {
	t.Parallel()
	p := startStreamReuseProxy(t)
	steps := func(prefix string) []step {
		return []step{
			{"GET", prefix + "/plain", "", 200, "GET " + prefix + "/plain "},
			{"POST", prefix + "/echo", "hello", 200, "POST " + prefix + "/echo hello"},
			{"GET", "/flaky" + prefix, "", 200, "GET /flaky" + prefix + " "},
			{"GET", "/stall-route" + prefix, "", 504, ""},
			{"GET", "/stall-idle" + prefix, "", 408, ""},
			{"GET", "/mirrored" + prefix, "", 200, "GET /mirrored" + prefix + " "},
			{"GET", "/tagged" + prefix, "", 200, "GET /tagged" + prefix + " "},
			{"GET", "/trailers" + prefix, "", 200, "GET /trailers" + prefix + " "},
			{"GET", "/declared" + prefix, "", 200, "GET /declared" + prefix + " "},
			{"POST", "/early" + prefix, "hello", 200, "early /early" + prefix},
		}
	}
	// Three clients: a cluster allows three retries at once (Envoy's
	// default max_retries), and every client's /flaky request is retried.
	const clients, rounds = 3, 4
	for _, cp := range p.paths(t)[2:] { // http2, http2-tls
		t.Run(cp.name, func(t *testing.T) {
			// One request first, so that the clients' streams share its
			// connection instead of each dialling one.
			if msg := checkReuseStep(cp, step{"GET", "/first/" + cp.name, "", 200, "GET /first/" + cp.name + " "}); msg != "" {
				t.Fatal(msg)
			}
			var wg sync.WaitGroup
			var plain []string
			var mu sync.Mutex
			for c := range clients {
				wg.Go(func() {
					for r := range rounds {
						for i, s := range steps(fmt.Sprintf("/%s/%d/%d", cp.name, c, r)) {
							if msg := checkReuseStep(cp, s); msg != "" {
								t.Errorf("%s %s: %s", s.method, s.path, msg)
								return
							}
							after := step{"GET", fmt.Sprintf("/plain/%s/%d/%d/%d", cp.name, c, r, i), "", 200, ""}
							after.want = "GET " + after.path + " "
							if msg := checkReuseStep(cp, after); msg != "" {
								t.Errorf("after %s: %s: %s", s.path, after.path, msg)
								return
							}
							mu.Lock()
							plain = append(plain, after.path)
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			if cp.dials.Load() != 1 {
				t.Errorf("the client opened %d connections, want its streams on one", cp.dials.Load())
			}
			for _, path := range plain {
				if line := requestLineOf(t, p.testProxy, path); line["status"] != float64(200) || line["attempts"] != float64(1) {
					t.Errorf("the access log line of %s is %v", path, line)
				}
			}
		})
	}
}

// An HTTP/1.1 connection's stream goes to the pool HTTP/2 streams share when
// the connection ends, and the next connection's first request takes it.
// Clients each send requests on a new connection every time (clear text and
// TLS, Connection: close) while HTTP/2 streams run on both listeners, with
// answers that carry a route header or a trailer of their own between plain
// ones: each response must be its own request's. Under -race, a stream taken
// while the connection that released it still read it is a data race.
func TestCodecStreamsOfEndedConnectionsServeOthers(t *testing.T) {
	t.Parallel()
	p := startStreamReuseProxy(t)
	paths := p.paths(t)
	for _, cp := range paths[:2] {
		cp.tr.DisableKeepAlives = true // a connection per request, each asking for its close
	}
	const clients, rounds = 3, 10
	var wg sync.WaitGroup
	for _, cp := range paths {
		for c := range clients {
			wg.Go(func() {
				for r := range rounds {
					for _, kind := range []string{"plain", "tagged", "trailers"} {
						path := fmt.Sprintf("/%s/%s/%d/%d", kind, cp.name, c, r)
						if msg := checkReuseStep(cp, step{"GET", path, "", 200, "GET " + path + " "}); msg != "" {
							t.Errorf("%s: %s", path, msg)
							return
						}
					}
				}
			})
		}
	}
	wg.Wait()
	for _, cp := range paths[:2] {
		if n := cp.dials.Load(); n != clients*rounds*3 {
			t.Errorf("%s: the clients opened %d connections, want one per request (%d)", cp.name, n, clients*rounds*3)
		}
	}
}
