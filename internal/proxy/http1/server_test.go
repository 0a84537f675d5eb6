package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// serve runs a Server with h on a loopback listener and returns its address.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		s.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.ServeConn(c, nil) })
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c, bufio.NewReader(c)
}

func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body: %v", err)
	}
	return resp, string(body)
}

// Pipelined requests are answered in order on one connection; a small
// response gets a Content-Length, a larger one is chunked with its trailers.
func TestServeFramesResponses(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/small":
			fmt.Fprintf(w, "%s %s", r.Method, body)
		case "/large":
			w.Header().Set("Trailer", "X-Sum")
			_, _ = w.Write(bytes.Repeat([]byte("x"), 5000))
			w.Header().Set("X-Sum", "5000")
			w.Header().Set(http.TrailerPrefix+"X-Late", "yes")
		}
	})})
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "POST /small HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"+
		"GET /large HTTP/1.1\r\nHost: a\r\n\r\n"+
		"POST /small HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	resp, body := readResponse(t, br, "POST")
	if body != "POST hi" || resp.ContentLength != 7 {
		t.Errorf("first: %q, Content-Length %d", body, resp.ContentLength)
	}
	resp, body = readResponse(t, br, "GET")
	if len(body) != 5000 || resp.ContentLength != -1 || resp.Trailer.Get("X-Sum") != "5000" || resp.Trailer.Get("X-Late") != "yes" {
		t.Errorf("second: %d bytes, Content-Length %d, trailers %v", len(body), resp.ContentLength, resp.Trailer)
	}
	if _, body = readResponse(t, br, "POST"); body != "POST abc" {
		t.Errorf("third: %q", body)
	}
}

// A HEAD response has the headers of the GET and no body; 204 and 304 have
// none either, and the connection goes on.
func TestServeBodilessResponses(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		}
		_, _ = io.WriteString(w, "hello")
	})})
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET /204 HTTP/1.1\r\nHost: a\r\n\r\nGET /304 HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, body := readResponse(t, br, "HEAD"); body != "" || resp.ContentLength != 5 {
		t.Errorf("HEAD: %q, Content-Length %d", body, resp.ContentLength)
	}
	for _, want := range []int{204, 304} {
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != want || body != "" {
			t.Errorf("got %d %q, want %d without a body", resp.StatusCode, body, want)
		}
	}
	if _, body := readResponse(t, br, "GET"); body != "hello" {
		t.Errorf("after them: %q", body)
	}
}

// 100 Continue is sent when the handler first reads the body, once; a
// request answered without reading its body closes the connection.
func TestServeExpectContinue(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusContinue) // as a proxy passing the upstream's on
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	})})
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != http.StatusContinue {
		t.Fatalf("got %d before the body, want 100", resp.StatusCode)
	}
	_, _ = io.WriteString(c, "hello")
	if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 200 || body != "hello" {
		t.Errorf("got %d %q, want the body echoed after one 100", resp.StatusCode, body)
	}
	_, _ = io.WriteString(c, "POST /refuse HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != http.StatusForbidden || !resp.Close {
		t.Errorf("refused: %d, close %v; want 403 closing the connection", resp.StatusCode, resp.Close)
	}
}

// A hijacked connection is the handler's, with the bytes read after the head.
func TestServeHijack(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		line, _ := brw.ReadString('\n')
		_, _ = conn.Write([]byte("echo: " + line))
	})})
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nfirst line\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	if line, _ := br.ReadString('\n'); line != "echo: first line\n" {
		t.Errorf("after the upgrade: %q", line)
	}
}

// A connection opening with the HTTP/2 preface goes to H2C with the preface
// replayed; a short HTTP/1.0 request is not held waiting for 24 bytes.
func TestServeH2CPreface(t *testing.T) {
	got := make(chan string, 1)
	addr := serve(t, &Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "h1") }),
		H2C: func(c net.Conn) {
			defer c.Close()
			b := make([]byte, len(h2Preface)+4)
			_, _ = io.ReadFull(c, b)
			got <- string(b)
		},
	})
	c, _ := dial(t, addr)
	_, _ = io.WriteString(c, h2Preface+"more")
	if b := <-got; b != h2Preface+"more" {
		t.Errorf("H2C read %q", b)
	}
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
	if _, body := readResponse(t, br, "GET"); body != "h1" {
		t.Errorf("HTTP/1.0: %q", body)
	}
}

// A client that goes away while its request is served cancels the
// request's context.
func TestServeClientGoneCancels(t *testing.T) {
	cause := make(chan error, 1)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	})})
	c, _ := dial(t, addr)
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	time.Sleep(2 * watchAfter) // not needed for the outcome: the watch starts either way
	_ = c.Close()
	if err := <-cause; !errors.Is(err, ErrClientGone) {
		t.Errorf("cause %v, want ErrClientGone", err)
	}
}

// Shutdown closes idle connections at once and busy ones after their
// response, which says so.
func TestServeShutdown(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})}
	addr := serve(t, s)
	idle, idleBR := dial(t, addr)
	_, _ = io.WriteString(idle, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	readResponse(t, idleBR, "GET")
	busy, busyBR := dial(t, addr)
	_, _ = io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	<-started
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	if _, err := idleBR.ReadByte(); err == nil {
		t.Error("the idle connection is still open")
	}
	close(release)
	if resp, body := readResponse(t, busyBR, "GET"); body != "ok" || !resp.Close {
		t.Errorf("busy: %q, close %v; want its response, closing", body, resp.Close)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// A connection that has not sent its first request when Shutdown starts gets
// it served (then closed), as with net/http's server: closing it at once
// would lose a request its client was about to send.
func TestServeShutdownServesANewConnectionsFirstRequest(t *testing.T) {
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})}
	addr := serve(t, s)
	fresh, freshBR := dial(t, addr)
	// The connection is served (tracked) once a request on another one is.
	other, otherBR := dial(t, addr)
	_, _ = io.WriteString(other, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	readResponse(t, otherBR, "GET")
	waitConns(t, s, 2)
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	if _, err := otherBR.ReadByte(); err == nil {
		t.Error("the idle connection is still open")
	}
	_, _ = io.WriteString(fresh, "GET /late HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, body := readResponse(t, freshBR, "GET"); body != "ok" || !resp.Close {
		t.Errorf("new connection: %q, close %v; want its response, closing", body, resp.Close)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// waitConns waits until s serves n connections.
func waitConns(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		got := len(s.conns)
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections served, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The request a handler gets is the one net/http's server would give it.
func TestServeRequestAsNetHTTP(t *testing.T) {
	requests := []string{
		"GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nX-Many: 1\r\nx-many: 2\r\nuser-agent: t\r\naccept-ENCODING: gzip\r\n\r\n",
		"GET http://other.example/p HTTP/1.1\r\nHost: ignored\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
		"POST /x HTTP/1.0\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc",
		"PUT /y HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n1\r\nz\r\n0\r\nX-T: v\r\n\r\n",
		"FROB /%7e HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
	}
	type view struct {
		Method, RequestURI, Proto, Host, Body string
		URL                                   string
		ProtoMinor                            int
		Header, Trailer                       http.Header
		ContentLength                         int64
		TransferEncoding                      []string
		Close                                 bool
	}
	see := func(r *http.Request) view {
		body, _ := io.ReadAll(r.Body)
		return view{r.Method, r.RequestURI, r.Proto, r.Host, string(body), r.URL.String(), r.ProtoMinor,
			r.Header.Clone(), r.Trailer, r.ContentLength, r.TransferEncoding, r.Close} // the header is the connection's
	}
	got := make(chan view, 1)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- see(r) })})
	for _, raw := range requests {
		want, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatalf("net/http refuses %q: %v", raw, err)
		}
		wantView := see(want)
		c, br := dial(t, addr)
		_, _ = io.WriteString(c, raw)
		readResponse(t, br, want.Method)
		if diff := cmp.Diff(wantView, <-got); diff != "" {
			t.Errorf("%q: (-net/http +codec)\n%s", raw, diff)
		}
	}
}

// The request a connection reuses for its next request carries nothing of the
// one before: not its fields, its query or its body, pipelined or not.
func TestServeNextRequestSeesNothingOfThePrevious(t *testing.T) {
	type view struct {
		URL    string
		Header http.Header
		Body   string
		Length int64
	}
	got := make(chan view, 4)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- view{r.URL.String(), r.Header.Clone(), string(body), r.ContentLength}
	})})
	first := "POST /first?secret=1 HTTP/1.1\r\nHost: a\r\nX-Only-First: yes\r\nCookie: c=1\r\nContent-Length: 3\r\n\r\nabc"
	second := "GET /second HTTP/1.1\r\nHost: a\r\nX-Second: 2\r\n\r\n"
	want := []view{
		{"/first?secret=1", http.Header{"X-Only-First": {"yes"}, "Cookie": {"c=1"}, "Content-Length": {"3"}}, "abc", 3},
		{"/second", http.Header{"X-Second": {"2"}}, "", 0},
	}
	for _, pipelined := range []bool{false, true} {
		c, br := dial(t, addr)
		if pipelined {
			_, _ = io.WriteString(c, first+second)
			readResponse(t, br, http.MethodPost)
			readResponse(t, br, http.MethodGet)
		} else {
			_, _ = io.WriteString(c, first)
			readResponse(t, br, http.MethodPost)
			_, _ = io.WriteString(c, second)
			readResponse(t, br, http.MethodGet)
		}
		for i, w := range want {
			if diff := cmp.Diff(w, <-got); diff != "" {
				t.Errorf("pipelined %v, request %d: (-want +got)\n%s", pipelined, i+1, diff)
			}
		}
	}
}

// keptValue records its release, made once the client has the connection's
// last response (or after a long wait, a failure: released before writing
// it, the response would only leave after the release).
type keptValue struct {
	released chan bool
	answered chan struct{}
}

func (v *keptValue) Release() {
	select {
	case <-v.answered:
		v.released <- true
	case <-time.After(30 * time.Second): // a hang, not a speed limit
		v.released <- false
	}
}

// What a handler keeps in the connection's slot is its own again from one
// request to the next, and released once when the connection ends, after its
// last response was written; never for a hijacked connection, whose handler
// may still use it.
func TestServeReleasesKeptValueWhenTheConnectionEnds(t *testing.T) {
	v := &keptValue{released: make(chan bool, 4), answered: make(chan struct{})}
	s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slot := w.(interface{ Kept() *any }).Kept()
		switch r.URL.Path {
		case "/keep":
			if *slot != nil {
				t.Errorf("a new connection's slot holds %v", *slot)
			}
			*slot = v
		case "/again":
			if *slot != v {
				t.Errorf("the slot holds %v, not what the last request kept", *slot)
			}
		case "/hijack":
			*slot = v
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
		}
		_, _ = io.WriteString(w, "ok")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// serveNext serves the next connection accepted; done is closed once
	// ServeConn returned.
	serveNext := func() (done chan struct{}) {
		done = make(chan struct{})
		go func() {
			defer close(done)
			if c, err := ln.Accept(); err == nil {
				s.ServeConn(c, nil)
			}
		}()
		return done
	}

	done := serveNext()
	c, br := dial(t, ln.Addr().String())
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute)) // past Release's wait: a release made too early fails there
	_, _ = io.WriteString(c, "GET /keep HTTP/1.1\r\nHost: a\r\n\r\n")
	readResponse(t, br, http.MethodGet)
	_, _ = io.WriteString(c, "GET /again HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if resp, _ := readResponse(t, br, http.MethodGet); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	close(v.answered)
	<-done
	select {
	case whenAnswered := <-v.released:
		if !whenAnswered {
			t.Fatal("released before the connection's last response was written")
		}
	default:
		t.Fatal("not released when the connection ended")
	}
	select {
	case <-v.released:
		t.Fatal("released twice")
	default:
	}

	done = serveNext()
	c, br = dial(t, ln.Addr().String())
	_, _ = io.WriteString(c, "GET /hijack HTTP/1.1\r\nHost: a\r\n\r\n")
	_, _ = br.ReadByte() // the handler closes the hijacked connection
	<-done
	select {
	case <-v.released:
		t.Fatal("released for a hijacked connection")
	default:
	}
}
