package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// smuggleCase is a malformed or ambiguous request and what each side does with it:
// "refused" (an error status or a closed connection, nothing reaches the backend) or
// "forwarded" (the backend received bytes: for the bad chunk cases, the head and the
// body up to the error, after which the proxy drops the upstream connection; the
// status the client gets then depends on whether the backend's early answer won the
// race, so only the verdict is asserted). The expectations for fasthttp and net/http
// record what they did when docs/dev/http1-codec.md was written, so that the decision
// record's table fails here when an upgrade changes it; the raw prototype must refuse
// every case but the valid one.
type smuggleCase struct {
	name, request     string
	fasthttp, nethttp string
	// endInput half-closes the client's side after the request: for a head that a
	// side may read as unfinished and wait on (net/http's proxy cancels a request
	// whose client half-closes, so only where needed).
	endInput bool
}

var smuggleCases = []smuggleCase{
	{"valid GET (control)", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "forwarded", "forwarded", false},
	{"Transfer-Encoding and Content-Length", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "forwarded", "forwarded", false},
	{"two different Content-Lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde", "refused", "refused", false},
	{"Content-Length with a sign", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nabcde", "refused", "refused", false},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", "forwarded", "forwarded", false},
	// A bare-LF head, then a CRLF one: a side that ends heads only at CRLF CRLF reads
	// both as one head.
	{"bare LF line ends", "GET / HTTP/1.1\nHost: x\n\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n", "forwarded", "forwarded", false},
	{"chunk size 0x5", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n", "refused", "forwarded", false},
	{"chunk without CRLF after data", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", "forwarded", "forwarded", false},
	{"unknown Transfer-Encoding", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "refused", "refused", false},
	{"NUL in a header value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", "refused", "refused", false},
	{"space before the colon", "GET / HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", "refused", "refused", false},
	{"70 KiB header line", "GET / HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", "refused", "forwarded", false},
}

// TestSmuggling sends each case to the three codecs, each in front of a backend that
// records the bytes it receives.
func TestSmuggling(t *testing.T) {
	sides := map[string]func(ln net.Listener, backend string){
		"raw":      func(ln net.Listener, backend string) { go (&rawProxy{backend: backend}).serve(ln) },
		"fasthttp": func(ln net.Listener, backend string) { go newFastProxy(backend).server().Serve(ln) },
		"nethttp": func(ln net.Listener, backend string) {
			go http.Serve(ln, netHTTPHandler("nethttp", &url.URL{Scheme: "http", Host: backend}))
		},
	}
	var table strings.Builder
	fmt.Fprintln(&table, "| case | raw | fasthttp | net/http |")
	results := map[string]map[string]string{}
	for name, start := range sides {
		rec := startRecorder(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		start(ln, rec.addr())
		results[name] = map[string]string{}
		for _, c := range smuggleCases {
			status, got := exchange(t, ln.Addr().String(), c, rec)
			verdict := "refused"
			switch {
			case len(got) > 0 && status == "200":
				verdict = "forwarded"
			case len(got) > 0:
				verdict = "forwarded"
			}
			results[name][c.name] = fmt.Sprintf("%s (%s)", verdict, status)
			if len(got) > 0 {
				t.Logf("%s, %s: the backend received %q", name, c.name, truncate(got))
			}
			want := map[string]string{"raw": "refused", "fasthttp": c.fasthttp, "nethttp": c.nethttp}[name]
			if c.name == smuggleCases[0].name {
				want = "forwarded"
			}
			// A 502 from fasthttp or net/http is a body cut after its head went
			// upstream: whether the head reached the backend before the error is a
			// race (seen both ways in CI), so either verdict is the same outcome.
			cut := name != "raw" && status == "502"
			if verdict != want && !cut {
				t.Errorf("%s, %s: %s (%s), want %s; the backend received %q", name, c.name, verdict, status, want, truncate(got))
			}
		}
	}
	for _, c := range smuggleCases {
		fmt.Fprintf(&table, "| %s | %s | %s | %s |\n", c.name, results["raw"][c.name], results["fasthttp"][c.name], results["nethttp"][c.name])
	}
	t.Log("\n" + table.String())
}

// exchange sends request to the proxy at addr and returns the first response's
// status (or "closed") and what the backend received meanwhile.
func exchange(t *testing.T, addr string, sc smuggleCase, rec *recorder) (status string, received []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a bound for a hung side, not a measurement
	if _, err := io.WriteString(c, sc.request); err != nil {
		t.Fatal(err)
	}
	if sc.endInput {
		c.(*net.TCPConn).CloseWrite()
	}
	status = "closed"
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		status = resp.Status[:3]
		resp.Body.Close()
	}
	c.Close()
	return status, rec.drain(t)
}

// recorder is a backend that reads a request head, answers 200 with Connection:
// close, and keeps every byte it received until the proxy closes the connection.
type recorder struct {
	ln     net.Listener
	mu     sync.Mutex
	cond   *sync.Cond
	active int
	got    []byte
}

func startRecorder(t *testing.T) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	r := &recorder{ln: ln}
	r.cond = sync.NewCond(&r.mu)
	go r.accept()
	return r
}

func (r *recorder) addr() string { return r.ln.Addr().String() }

func (r *recorder) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.active++
		r.mu.Unlock()
		go r.record(c)
	}
}

func (r *recorder) record(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var got []byte
	buf := make([]byte, 4096)
	answered := false
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if !answered && bytes.Contains(got, []byte("\r\n\r\n")) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			answered = true
		}
		if err != nil {
			break
		}
	}
	r.mu.Lock()
	r.got = append(r.got, got...)
	r.active--
	r.cond.Broadcast()
	r.mu.Unlock()
}

// drain waits until every connection the proxy opened is closed, then returns and
// forgets what they carried.
func (r *recorder) drain(t *testing.T) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.active > 0 {
		r.cond.Wait()
	}
	got := r.got
	r.got = nil
	return got
}

func truncate(b []byte) []byte {
	if len(b) > 300 {
		return b[:300]
	}
	return b
}
