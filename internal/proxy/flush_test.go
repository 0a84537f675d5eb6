package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestResponsesStreamOrLeaveWhole: a response of unknown length reaches the client chunk
// by chunk as the backend sends it (streaming must not wait for the end), and a response
// with a Content-Length keeps it and arrives whole.
func TestResponsesStreamOrLeaveWhole(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := startScripted(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/whole" {
			body := "a response of known length"
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = io.WriteString(w, body)
			return
		}
		// The second chunk is only sent once the client has the first: a proxy that
		// held the first back until the end would never deliver it.
		_, _ = io.WriteString(w, "first;")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		case <-time.After(time.Minute):
		}
		_, _ = io.WriteString(w, "second;")
	})
	p := proxyToOneBackend(t, "stream", b.addr())

	resp, err := http.Get(p.httpURL(t, "/whole"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "a response of known length" || resp.ContentLength != int64(len(body)) {
		t.Errorf("known length: %q with Content-Length %d, want the body with its length", body, resp.ContentLength)
	}

	resp, err = http.Get(p.httpURL(t, "/stream"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() {
		first, _ := r.ReadString(';')
		got <- first
	}()
	select {
	case first := <-got:
		if first != "first;" {
			t.Fatalf("first chunk %q", first)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first chunk of a streamed response never arrived: the proxy holds it back")
	}
	close(release)
	if rest, _ := io.ReadAll(r); string(rest) != "second;" {
		t.Errorf("rest %q, want %q", rest, "second;")
	}
}
