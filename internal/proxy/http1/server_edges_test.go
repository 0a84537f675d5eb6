package http1

import (
	"io"
	"net/http"
	"testing"
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
