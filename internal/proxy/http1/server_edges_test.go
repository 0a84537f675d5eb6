package http1

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A response is sent even when part of the next request is already there:
// a client that sends a CRLF after its body (RFC 9112 section 2.2), or the
// start of its next request, and waits for the answer gets it. It was held
// in the write buffer until a whole next head came, and lost when the
// header-read timeout cut the connection.
func TestServeFlushesBeforeAPartialHead(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	})})
	for _, after := range []string{"\r\n", "GET /second HT"} {
		c, br := dial(t, addr)
		_, _ = io.WriteString(c, "POST /first HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"+after)
		if _, body := readResponse(t, br, "POST"); body != "ok /first" {
			t.Errorf("followed by %q: got %q", after, body)
		}
		if after == "\r\n" {
			continue
		}
		_, _ = io.WriteString(c, "TP/1.1\r\nHost: a\r\n\r\n")
		if _, body := readResponse(t, br, "GET"); body != "ok /second" {
			t.Errorf("the second request: got %q", body)
		}
	}
}

// A handler may answer while another goroutine still reads the request body
// (as an upstream request does) and waits for the client: the response is
// written and sent at once, the read is cut short when the handler returns,
// and the connection closes, since the rest of the body was never read.
func TestServeAnswersWhileTheBodyIsReadElsewhere(t *testing.T) {
	readErr := make(chan error, 1)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reading := make(chan struct{})
		go func() {
			buf := make([]byte, 64)
			n, _ := r.Body.Read(buf) // the part sent
			close(reading)
			_, err := io.ReadFull(r.Body, buf[n:])
			readErr <- err
		}()
		<-reading
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "early")
	})})
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nfirst part")
	resp, body := readResponse(t, br, "POST")
	if resp.StatusCode != http.StatusForbidden || body != "early" || !resp.Close {
		t.Errorf("got %d %q, close %v; want 403 early, closing the connection", resp.StatusCode, body, resp.Close)
	}
	if err := <-readErr; err == nil {
		t.Error("the other goroutine's read went on after the handler returned")
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stays open with the body unread")
	}
}

// An idle connection holds no more memory after a large request head (or a
// large response header) than after a small one: what it kept of the last
// request (the head's buffer, the request, the response's fields) made 50
// idle connections that each once sent a 50 KiB head cost 6 MiB more than
// 50 that did not, where net/http's server keeps its 4 KiB buffers.
func TestServeIdleConnectionsKeepNoLargeHead(t *testing.T) {
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("X-Big"))
		_, _ = io.WriteString(w, "x")
	})})
	const conns = 50
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	perConn := func(value string) int64 {
		before := heap()
		for range conns {
			c, br := dial(t, addr)
			_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: "+value+"\r\n\r\n")
			readResponse(t, br, "GET")
		}
		return (int64(heap()) - int64(before)) / conns
	}
	small := perConn("small")
	large := perConn(strings.Repeat("a", 50<<10))
	if large-small > 16<<10 {
		t.Errorf("an idle connection holds %d bytes after a 50 KiB head, %d after a small one", large, small)
	}
}

// The answers to pipelined requests leave together only while the requests
// are quick: one that waits (on a slow upstream) does not hold back the
// answers already written. The slow handler here waits until the client has
// its first answer.
func TestServePipelinedAnswerNotHeldBySlowRequest(t *testing.T) {
	firstRead := make(chan struct{})
	waited := make(chan bool, 1)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-firstRead:
				waited <- true
			case <-time.After(time.Minute): // a hang, not a speed limit
				waited <- false
			}
		}
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	})})
	c, br := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	_, _ = io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: a\r\n\r\nGET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, body := readResponse(t, br, "GET"); body != "ok /fast" {
		t.Fatalf("first: %q", body)
	}
	close(firstRead)
	if _, body := readResponse(t, br, "GET"); body != "ok /slow" {
		t.Fatalf("second: %q", body)
	}
	if !<-waited {
		t.Error("the first answer was held until the second request was served")
	}
}

// A response whose declared length is written leaves at once: the client has
// it while the handler still runs (the proxy's access log line, metrics and
// the upstream connection's return to its pool come after its last write).
func TestServeWholeResponseLeavesBeforeHandlerReturns(t *testing.T) {
	read := make(chan struct{})
	waited := make(chan bool, 1)
	addr := serve(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
		select {
		case <-read:
			waited <- true
		case <-time.After(20 * time.Second): // a hang, not a speed limit
			waited <- false
		}
	})})
	c, br := dial(t, addr)
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, body := readResponse(t, br, "GET"); body != "hello" {
		t.Fatalf("body %q", body)
	}
	close(read)
	if !<-waited {
		t.Error("the whole response was held until the handler returned")
	}
}

// writeRecorder records the writes made to a connection, and for each whether
// mark was set when it was made.
type writeRecorder struct {
	net.Conn
	mark   atomic.Bool
	mu     sync.Mutex
	marked []bool
}

func (c *writeRecorder) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.marked = append(c.marked, c.mark.Load())
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// serveRecorded serves one connection with s, through rec, which the handler
// can mark; it returns the address to dial and a channel closed once the
// connection is served.
func serveRecorded(t *testing.T, s *Server, rec *writeRecorder) (addr string, served <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		rec.Conn = c
		s.ServeConn(rec, nil)
	}()
	t.Cleanup(func() { _ = ln.Close(); s.Close(); <-done })
	return ln.Addr().String(), done
}

// The answers to requests pipelined together leave together: a response is
// sent as soon as it is whole only when no request is waiting behind it, so
// nothing is written while the first request is served (the second one's
// handler marks the connection when it starts).
func TestServePipelinedAnswersLeaveTogether(t *testing.T) {
	rec := &writeRecorder{}
	addr, served := serveRecorded(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bc" {
			rec.mark.Store(true)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(r.URL.Path)))
		_, _ = io.WriteString(w, r.URL.Path)
	})}, rec)
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /bc HTTP/1.1\r\nHost: a\r\n\r\n")
	for _, want := range []string{"/a", "/bc"} {
		if _, body := readResponse(t, br, "GET"); body != want {
			t.Fatalf("body %q, want %q", body, want)
		}
	}
	_ = c.Close()
	<-served
	if len(rec.marked) == 0 || !rec.marked[0] {
		t.Errorf("the first answer was written while the first request was served (writes, second request started: %v)", rec.marked)
	}
}

// A response the connection closes after is not sent before the handler is
// done (it leaves with the close): the handler marks the connection as it
// returns.
func TestServeClosingResponseLeavesWithTheClose(t *testing.T) {
	rec := &writeRecorder{}
	addr, served := serveRecorded(t, &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, _ = io.WriteString(w, "hello")
		rec.mark.Store(true)
	})}, rec)
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	if _, body := readResponse(t, br, "GET"); body != "hello" {
		t.Fatalf("body %q", body)
	}
	<-served
	if len(rec.marked) == 0 || !rec.marked[0] {
		t.Errorf("the response was written before the handler was done (writes, handler done: %v)", rec.marked)
	}
}
