package hcm

import (
	"net/http"
	"testing"
)

// BenchmarkRemoveHopByHop removes the hop-by-hop fields of a response head as
// nginx sends one (Connection: keep-alive among eight fields).
func BenchmarkRemoveHopByHop(b *testing.B) {
	src := http.Header{
		"Server": {"nginx"}, "Date": {"Sat, 28 Nov 2026 12:00:00 GMT"}, "Content-Type": {"text/plain"},
		"Content-Length": {"13"}, "Connection": {"keep-alive"}, "Last-Modified": {"Sat, 28 Nov 2026 11:00:00 GMT"},
		"Etag": {`"6748a1c0-d"`}, "Accept-Ranges": {"bytes"},
	}
	h := make(http.Header, len(src))
	for b.Loop() {
		for k, v := range src {
			h[k] = v
		}
		removeHopByHop(h)
	}
	if _, ok := h["Connection"]; ok || len(h) != len(src)-1 {
		b.Fatalf("left %v", h)
	}
}
