package proxy

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// A backend's early answer (here 403, written before it read the request
// body) reaches a client whose upload is unfinished and who waits for it, on
// every path, as the codec's full duplex promises: the upstream request's
// body, read on another goroutine, waiting for the client, held the lock
// the response head needed, so that nothing was sent until the client sent
// more.
func TestCodecEarlyResponseDuringUpload(t *testing.T) {
	t.Parallel()
	be := startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Length", "4")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "nope")
		_ = http.NewResponseController(w).Flush()
	})
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, nil, codecRoutes())
	for _, rp := range p.rawPaths() {
		t.Run(rp.name, func(t *testing.T) {
			conn, br := rp.dial(t)
			_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang, not a speed limit
			if _, err := io.WriteString(conn, "POST /codec/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nfirst part"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodPost})
			if err != nil {
				t.Fatalf("no response while the upload waits: %v", err)
			}
			if body := readBody(t, resp); resp.StatusCode != http.StatusForbidden || body != "nope" {
				t.Errorf("got %d %q, want the backend's 403 nope", resp.StatusCode, body)
			}
		})
	}
}

// A request answered without its body, when that body will not be read to
// keep the connection (over 256 KiB of it left, or the client said
// Connection: close), is answered at once, closing the connection, as
// net/http's server did: the codec read up to 256 KiB of it first, so that a
// client that waited for the answer got none.
func TestCodecUnreadBodyNotWaitedFor(t *testing.T) {
	t.Parallel()
	be := startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {})
	p := startCodecProxy(t, map[string]string{"be": be.addr()}, nil, codecRoutes())
	for _, rp := range p.rawPaths() {
		for name, head := range map[string]string{
			"over 256 KiB left": "Content-Length: 10000000\r\n",
			"Connection: close": "Content-Length: 100000\r\nConnection: close\r\n",
		} {
			t.Run(rp.name+"/"+name, func(t *testing.T) {
				conn, br := rp.dial(t)
				_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang, not a speed limit
				if _, err := io.WriteString(conn, "POST /nowhere HTTP/1.1\r\nHost: x\r\n"+head+"\r\nfirst part"); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodPost})
				if err != nil {
					t.Fatalf("%q: no response while the upload waits: %v", head, err)
				}
				if resp.StatusCode != http.StatusNotFound || !resp.Close {
					t.Errorf("%q: got %d, close %v; want 404 closing the connection", head, resp.StatusCode, resp.Close)
				}
			})
		}
	}
}
