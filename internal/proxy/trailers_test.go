package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRequestTrailersKeepTheHeaderLimits: request trailers are held to the header limits
// (100 fields, 60 KiB): beyond them the client gets 431 and the upstream never sees
// them; within them they are forwarded.
func TestRequestTrailersKeepTheHeaderLimits(t *testing.T) {
	var seen atomic.Int64 // trailer fields the upstream received, last request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return // the body did not arrive whole: no trailers were received
		}
		n := 0
		for _, v := range r.Trailer { // declared names are there before any value arrives
			if len(v) > 0 && v[0] != "" {
				n++
			}
		}
		seen.Store(int64(n))
	}))
	defer srv.Close()
	p := proxyToOneBackend(t, "t", srv.Listener.Addr().String())

	send := func(fields, valueLen int) int {
		t.Helper()
		seen.Store(-1)
		req, _ := http.NewRequest(http.MethodPost, p.httpURL(t, "/"), io.NopCloser(strings.NewReader("body")))
		req.ContentLength = -1 // chunked: trailers follow the body
		req.Trailer = http.Header{}
		for i := 0; i < fields; i++ {
			req.Trailer.Set(fmt.Sprintf("X-T%d", i), strings.Repeat("v", valueLen))
		}
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(50, 10); code != http.StatusOK || seen.Load() != 50 {
		t.Errorf("50 small trailers: %d, upstream saw %d, want 200 and 50", code, seen.Load())
	}
	if code := send(101, 1); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("101 trailers: %d, want 431", code)
	}
	if n := seen.Load(); n > 0 {
		t.Errorf("the upstream received %d trailers of a refused request", n)
	}
	if code := send(20, 4000); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("80 KB of trailers: %d, want 431", code)
	}
}
