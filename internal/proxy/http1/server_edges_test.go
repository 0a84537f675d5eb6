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
