package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream serves each accepted connection with serve, on a goroutine of
// its own, and returns its address.
func rawUpstream(t *testing.T, serve func(conn net.Conn, br *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang, not a speed limit
				serve(conn, bufio.NewReader(conn))
			}()
		}
	}()
	return ln.Addr().String()
}

var errFallbackUsed = errors.New("the request went to the fallback http.Transport")

// testClient is a codec client whose fallback refuses every request.
func testClient(t *testing.T, expectContinueTimeout time.Duration) *HTTP1Client {
	t.Helper()
	c := NewHTTP1Client(&http.Transport{
		// A request that reaches the fallback fails: these tests are about the
		// codec client's own exchanges.
		Proxy:                 func(*http.Request) (*url.URL, error) { return nil, errFallbackUsed },
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       time.Minute,
		ExpectContinueTimeout: expectContinueTimeout,
	})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func (c *HTTP1Client) idleCount(addr string) int {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return len(c.Idle[addr])
}

// watchedBody is a request body that records when it is first read.
type watchedBody struct {
	r         *strings.Reader
	read      atomic.Bool
	got100    *atomic.Bool
	before100 atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	if b.got100 != nil && !b.got100.Load() {
		b.before100.Store(true)
	}
	n, err := b.r.Read(p)
	if err == nil && b.r.Len() == 0 {
		err = io.EOF // with the last bytes, as a server's request body does
	}
	return n, err
}

// expecting is a POST of body to addr that expects 100 Continue; the 1xx
// responses it gets are recorded in got100 and interims.
func expecting(t *testing.T, addr string, body *watchedBody, length int64, interims *[]int) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/upload", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Expect", "100-continue")
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
		if code == http.StatusContinue {
			body.got100.Store(true)
		}
		*interims = append(*interims, code)
		return nil
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// exchange makes req with c and reads its response's body.
func exchange(t *testing.T, c *HTTP1Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return res, string(got)
}

// A request with Expect: 100-continue is the codec client's: its head goes
// alone, the body waits for the upstream's 100 (which the trace passes on, as
// the connection manager's does to the client), and a final response before
// the 100 is answered without the body ever read, on a connection that is not
// reused. Without a 100, the body goes after ExpectContinueTimeout.
func TestHTTP1ClientExpectContinue(t *testing.T) {
	t.Run("100 Continue, then the body", func(t *testing.T) {
		addr := rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if req.Header.Get("Expect") == "100-continue" {
					_, _ = io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n")
				}
				b, _ := io.ReadAll(req.Body)
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(b))+"\r\n\r\n"+string(b))
			}
		})
		c := testClient(t, time.Hour) // only the 100 may release the body
		var interims []int
		body := &watchedBody{r: strings.NewReader("hello"), got100: new(atomic.Bool)}
		res, got := exchange(t, c, expecting(t, addr, body, 5, &interims))
		if res.StatusCode != 200 || got != "hello" {
			t.Errorf("got %d %q, want 200 \"hello\"", res.StatusCode, got)
		}
		if len(interims) != 1 || interims[0] != 100 || body.before100.Load() {
			t.Errorf("interim responses %v, body read before the 100: %v; want [100] and the body after it", interims, body.before100.Load())
		}
		if n := c.idleCount(addr); n != 1 {
			t.Errorf("%d pooled connections after the exchange, want 1 (the codec client's)", n)
		}
	})
	t.Run("a final response first: no body, no reuse", func(t *testing.T) {
		closed := make(chan bool, 1)
		addr := rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 6\r\n\r\ndenied")
			// The client must close: anything else it sends would be the body.
			_, err := br.ReadByte()
			closed <- err == io.EOF
		})
		c := testClient(t, time.Hour)
		var interims []int
		body := &watchedBody{r: strings.NewReader("never sent"), got100: new(atomic.Bool)}
		res, got := exchange(t, c, expecting(t, addr, body, 10, &interims))
		if res.StatusCode != 401 || got != "denied" {
			t.Errorf("got %d %q, want 401 \"denied\"", res.StatusCode, got)
		}
		if !<-closed {
			t.Error("the upstream read bytes after its answer, want the connection closed")
		}
		if body.read.Load() {
			t.Error("the request body was read, want it never sent")
		}
		if n := c.idleCount(addr); n != 0 {
			t.Errorf("%d pooled connections, want none", n)
		}
	})
	t.Run("no 100: the body after the timeout", func(t *testing.T) {
		addr := rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				b, _ := io.ReadAll(req.Body) // an upstream that knows no 100 Continue
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(b))+"\r\n\r\n"+string(b))
			}
		})
		c := testClient(t, 10*time.Millisecond)
		var interims []int
		body := &watchedBody{r: strings.NewReader("late"), got100: new(atomic.Bool)}
		res, got := exchange(t, c, expecting(t, addr, body, 4, &interims))
		if res.StatusCode != 200 || got != "late" || len(interims) != 0 {
			t.Errorf("got %d %q after interims %v, want 200 \"late\" and none", res.StatusCode, got, interims)
		}
		if n := c.idleCount(addr); n != 1 {
			t.Errorf("%d pooled connections after the exchange, want 1 (the codec client's)", n)
		}
	})
}

// upgrading is a GET to addr that asks to switch to protocol.
func upgrading(t *testing.T, ctx context.Context, addr, protocol string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/socket", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol)
	return req
}

// An upgrade is the codec client's: its 101 hands the connection over as
// the response body, an io.ReadWriteCloser (what the connection manager
// splices), with the new protocol's bytes that came with the 101; the
// request's context no longer governs it, and it is never pooled. A 101
// that names no protocol closes its connection; an upgrade the upstream
// declines leaves the connection to the pool.
func TestHTTP1ClientUpgrade(t *testing.T) {
	t.Run("101: the connection handed over", func(t *testing.T) {
		ended := make(chan error, 1)
		addr := rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
			req, err := http.ReadRequest(br)
			if err != nil || req.Header.Get("Upgrade") != "echo" {
				ended <- fmt.Errorf("request %v, %v; want an upgrade to echo", req, err)
				return
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello ")
			_, err = io.Copy(conn, br) // echoes until the client closes
			ended <- err
		})
		c := testClient(t, time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		res, err := c.RoundTrip(upgrading(t, ctx, addr, "echo"))
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("status %d, want 101", res.StatusCode)
		}
		rwc, ok := res.Body.(io.ReadWriteCloser)
		if !ok {
			t.Fatalf("the 101's body is a %T, want an io.ReadWriteCloser", res.Body)
		}
		cancel() // the exchange is over: the connection is the caller's
		if _, err := io.WriteString(rwc, "world"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len("hello world"))
		if _, err := io.ReadFull(rwc, got); err != nil || string(got) != "hello world" {
			t.Errorf("read %q, %v; want \"hello world\" (the bytes after the 101, then the echo)", got, err)
		}
		if n := c.idleCount(addr); n != 0 {
			t.Errorf("%d pooled connections, want none", n)
		}
		_ = rwc.Close()
		if err := <-ended; err != nil {
			t.Errorf("the upstream's side: %v", err)
		}
	})
	t.Run("101 without a protocol: refused, not reused", func(t *testing.T) {
		addr := rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
			if _, err := http.ReadRequest(br); err == nil {
				_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\n\r\n")
				_, _ = io.Copy(io.Discard, br)
			}
		})
		c := testClient(t, time.Second)
		res, err := c.RoundTrip(upgrading(t, context.Background(), addr, "echo"))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := res.Body.(io.Writer); ok || res.StatusCode != http.StatusSwitchingProtocols {
			t.Errorf("status %d, body %T; want 101 with a body that cannot be written", res.StatusCode, res.Body)
		}
		_ = res.Body.Close()
		if n := c.idleCount(addr); n != 0 {
			t.Errorf("%d pooled connections, want none", n)
		}
	})
	t.Run("declined: the connection pooled", func(t *testing.T) {
		addr := rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
			for {
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno")
			}
		})
		c := testClient(t, time.Second)
		res, got := exchange(t, c, upgrading(t, context.Background(), addr, "echo"))
		if res.StatusCode != 200 || got != "no" {
			t.Errorf("got %d %q, want 200 \"no\"", res.StatusCode, got)
		}
		if n := c.idleCount(addr); n != 1 {
			t.Errorf("%d pooled connections, want 1", n)
		}
	})
}

// A cluster's idle_timeout of 0s keeps idle connections until the upstream
// closes them (Envoy's meaning, and http.Transport's for IdleConnTimeout 0):
// the next request reuses the connection.
func TestHTTP1ClientNoIdleTimeout(t *testing.T) {
	var accepted atomic.Int64
	addr := rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
		accepted.Add(1)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := testClient(t, time.Second)
	c.idleTimeout = 0
	for range 2 {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if res, got := exchange(t, c, req); res.StatusCode != 200 || got != "ok" {
			t.Fatalf("got %d %q, want 200 \"ok\"", res.StatusCode, got)
		}
		waitPooled(t, c, addr)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections for 2 requests, want 1", n)
	}
}

// waitPooled waits until c holds a connection to addr in its pool.
func waitPooled(t *testing.T, c *HTTP1Client, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang, not a speed limit
	for c.idleCount(addr) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the connection never returned to the pool")
		}
		time.Sleep(time.Millisecond)
	}
}

// bodyEchoUpstream answers each request with its body, counting the
// connections it accepts in accepted.
func bodyEchoUpstream(t *testing.T, accepted *atomic.Int64) string {
	return rawUpstream(t, func(conn net.Conn, br *bufio.Reader) {
		accepted.Add(1)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			got, _ := io.ReadAll(req.Body)
			_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(got), got)
		}
	})
}

// lateEOFBody returns its bytes with a nil error, and io.EOF only on a later
// read, after a pause, as a reader that knows no length does; or, with
// release set, once release is closed: as an HTTP/2 client's stream that
// carried its whole Content-Length in DATA frames but sends END_STREAM only
// once it has the response.
type lateEOFBody struct {
	r       *strings.Reader
	pause   time.Duration
	release chan struct{}
}

func (b *lateEOFBody) Read(p []byte) (int, error) {
	if b.r.Len() == 0 {
		if b.release != nil {
			<-b.release
		}
		time.Sleep(b.pause)
		return 0, io.EOF
	}
	return b.r.Read(p)
}

// A body with a Content-Length is complete once that many bytes are written:
// an upstream that answers before the writer's read of io.EOF leaves the
// connection reusable. The writer's pause makes that order certain; without
// the rule, the response's end found the writer unfinished and closed the
// connection (TestHTTP1ClientReusesConnections failed so under load).
func TestHTTP1ClientReusesConnectionAfterFullBody(t *testing.T) {
	var accepted atomic.Int64
	addr := bodyEchoUpstream(t, &accepted)
	c := testClient(t, time.Second)
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", &lateEOFBody{r: strings.NewReader("a body"), pause: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = 6
		if res, got := exchange(t, c, req); res.StatusCode != 200 || got != "a body" {
			t.Fatalf("got %d %q, want 200 \"a body\"", res.StatusCode, got)
		}
		waitPooled(t, c, addr)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections for 2 requests with bodies, want 1", n)
	}
}

// Once a body with a Content-Length is written whole, the response is not
// held for the body's io.EOF: a client whose stream ends only after the
// response (an HTTP/2 client that sends END_STREAM late) gets all of it, and
// the connection is still reused.
func TestHTTP1ClientResponseNotHeldForTheBodysEOF(t *testing.T) {
	var accepted atomic.Int64
	addr := bodyEchoUpstream(t, &accepted)
	c := testClient(t, time.Second)
	for range 2 {
		body := &lateEOFBody{r: strings.NewReader("a body"), release: make(chan struct{})}
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = 6
		type result struct {
			res *http.Response
			got string
		}
		done := make(chan result, 1)
		go func() {
			res, err := c.RoundTrip(req)
			if err != nil {
				done <- result{}
				return
			}
			got, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			done <- result{res, string(got)}
		}()
		select {
		case r := <-done:
			if r.res == nil || r.res.StatusCode != 200 || r.got != "a body" {
				t.Fatalf("got %v %q, want 200 \"a body\"", r.res, r.got)
			}
		case <-time.After(30 * time.Second): // a hang, not a speed limit
			close(body.release)
			t.Fatal("the response's end waited for the request body's io.EOF")
		}
		close(body.release)
		waitPooled(t, c, addr)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections for 2 requests with bodies, want 1", n)
	}
}
