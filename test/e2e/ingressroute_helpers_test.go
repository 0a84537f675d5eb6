package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/echo"
)

// checkIngressRoutes runs the offline check on dir and returns the IngressRoutes'
// statuses by "namespace/name".
func checkIngressRoutes(t *testing.T, dir string, opts dag.Options) map[string]*dag.Status {
	t.Helper()
	return checkStatuses(t, dir, opts, dag.KindIngressRoute)
}

// checkStatuses runs the offline check on dir and returns the statuses of the objects of
// kind by "namespace/name", failing t on manifest problems and translation errors.
func checkStatuses(t *testing.T, dir string, opts dag.Options, kind string) map[string]*dag.Status {
	t.Helper()
	res, err := app.Check(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.TranslateErr != nil {
		t.Errorf("translation failed: %v", res.TranslateErr)
	}
	for _, p := range res.Problems {
		t.Errorf("manifest problem: %s:%d: %s", p.File, p.Line, p.Reason)
	}
	out := map[string]*dag.Status{}
	for _, s := range res.Statuses {
		if s.Object.Kind == kind {
			out[s.Object.Namespace+"/"+s.Object.Name] = s
		}
	}
	return out
}

// getE is get for goroutines other than the test's: it returns the error instead of
// failing the test.
func (e *env) getE(host, path string, header ...string) (result, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+path, nil)
	if err != nil {
		return result{}, err
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return fetch(req, e.client)
}

// getTLSE is getTLS (HTTP/1.1) that returns the error instead of failing the test.
func (e *env) getTLSE(host, path string) (result, error) {
	addr := e.httpsAddr()
	if addr == "" {
		return result{}, fmt.Errorf("no HTTPS listener")
	}
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{ServerName: host, InsecureSkipVerify: true}, // self-signed test certificates
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		return result{}, err
	}
	return fetch(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
}

// poll is eventually for goroutines other than the test's: it reports whether cond held
// before timeout instead of failing the test.
func poll(timeout time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// concurrently runs fns in goroutines and waits for all of them. They must report with
// t.Errorf, never t.Fatal.
func concurrently(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	wg.Wait()
}

// tally sends n GET host+path requests over a few keep-alive connections and counts the
// answers by service; other answers count as "status N", failed requests as "error".
func (e *env) tally(host, path string, n int) map[string]int {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var mu sync.Mutex
	counts := map[string]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				key := "error"
				req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+path, nil)
				req.Host = host
				if r, err := fetch(req, client); err == nil && r.status == 200 {
					key = r.service()
				} else if err == nil {
					key = fmt.Sprintf("status %d", r.status)
				}
				mu.Lock()
				counts[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return counts
}

// load sends requests continuously, over new and over kept-alive connections, and
// records every answer that is not a 200 from one of the expected services.
type load struct {
	stopc    chan struct{}
	wg       sync.WaitGroup
	sent     atomic.Int64
	mu       sync.Mutex
	failures []string
	stopFn   func()
}

func startLoad(e *env, host, path string, services map[string]bool) *load {
	l := &load{stopc: make(chan struct{})}
	keepAlive := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}, Timeout: 10 * time.Second}
	for w := 0; w < 4; w++ {
		client := e.client // a new connection per request
		if w%2 == 1 {
			client = keepAlive
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stopc:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+path, nil)
				req.Host = host
				r, err := fetch(req, client)
				l.sent.Add(1)
				var failure string
				switch {
				case err != nil:
					failure = err.Error()
				case r.status != 200 || !services[r.service()]:
					failure = fmt.Sprintf("%d from %q: %s", r.status, r.service(), r.body)
				}
				if failure != "" {
					l.mu.Lock()
					l.failures = append(l.failures, failure)
					l.mu.Unlock()
				}
			}
		}()
	}
	l.stopFn = func() { keepAlive.CloseIdleConnections() }
	return l
}

// stop ends the load and returns how many requests were sent and which failed.
func (l *load) stop() (int64, []string) {
	close(l.stopc)
	l.wg.Wait()
	l.stopFn()
	return l.sent.Load(), l.failures
}

// handshake opens a TLS connection to addr with SNI serverName, limited to the given
// protocol versions (and cipher suites, for TLS 1.0-1.2, when not nil), and returns the
// version negotiated.
func handshake(addr, serverName string, minVersion, maxVersion uint16, suites []uint16) (uint16, error) {
	d := &tls.Dialer{
		NetDialer: &net.Dialer{Timeout: 2 * time.Second},
		Config: &tls.Config{
			ServerName:         serverName,
			InsecureSkipVerify: true, // self-signed test certificates
			MinVersion:         minVersion,
			MaxVersion:         maxVersion,
			CipherSuites:       suites,
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().Version, nil
}

// scripted is a backend whose answers a test scripts: answer(n) gives the status and the
// delay of the n-th request (from 1); without answer, it is 200 after X-Echo-Delay, as
// from echo backends. health is the status of /healthz. It answers with an echo body, so
// results read like those of echo backends.
type scripted struct {
	ns, name, addr string
	answer         func(n int64) (int, time.Duration)
	hits           atomic.Int64 // requests other than health checks
	inflight       atomic.Int64 // requests being answered
	health         atomic.Int64 // status of GET /healthz
	hcFailed       atomic.Int64 // health checks answered with another status than 200
	hcHost         atomic.Value // Host of the last health check
}

// fail makes the health check answer status from now on, and counts failed checks from 0.
func (s *scripted) fail(status int) {
	s.hcFailed.Store(0)
	s.health.Store(int64(status))
}

func startScripted(t *testing.T, ns, name string, answer func(n int64) (int, time.Duration)) *scripted {
	t.Helper()
	s := &scripted{ns: ns, name: name, answer: answer}
	s.health.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.addr = srv.Listener.Addr().String()
	t.Cleanup(srv.Close)
	return s
}

func (s *scripted) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		s.hcHost.Store(r.Host)
		status := int(s.health.Load())
		if status != http.StatusOK {
			s.hcFailed.Add(1)
		}
		w.WriteHeader(status)
		return
	}
	n := s.hits.Add(1)
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	status, delay := http.StatusOK, time.Duration(0)
	if s.answer != nil {
		status, delay = s.answer(n)
	} else if d, err := time.ParseDuration(r.Header.Get(echo.HeaderDelay)); err == nil {
		delay = d
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	body, _ := json.Marshal(echo.Response{
		Service: s.name, Namespace: s.ns, Endpoint: s.addr,
		Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Host: r.Host, Method: r.Method, Proto: r.Proto,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
