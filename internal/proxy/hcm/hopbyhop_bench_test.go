package hcm

import (
	"fmt"
	"net/http"
	"strings"
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

// longConnectionHeader is a head whose Connection field lists 7,000 names
// (about 60 KiB) among 104 fields, two of which it names.
func longConnectionHeader() http.Header {
	h := http.Header{"X-Keep": {"1"}, "X-Named": {"2"}, "Keep-Alive": {"timeout=5"}, "Close": {"3"}}
	for i := range 100 {
		h[fmt.Sprintf("X-Field-%d", i)] = []string{"v"}
	}
	h["Connection"] = []string{strings.Repeat("x-other,", 7000) + "X-NAMED, keep-alive, close"}
	return h
}

// The names a Connection field lists go, in any case (close too: a field of
// that name is a connection option's), whatever the list's length; the other
// fields stay.
func TestRemoveHopByHopLongConnectionList(t *testing.T) {
	h := longConnectionHeader()
	removeHopByHop(h)
	for _, k := range []string{"X-Named", "Close", "Keep-Alive", "Connection"} {
		if _, ok := h[k]; ok {
			t.Errorf("%s was kept", k)
		}
	}
	if h.Get("X-Keep") != "1" || h.Get("X-Field-99") != "v" || len(h) != 101 {
		t.Errorf("left %d fields, want the 101 not named", len(h))
	}
}

// BenchmarkRemoveHopByHopLongConnection: the work grows with the names listed,
// not with the names times the fields (a 60 KiB list over 100 fields).
func BenchmarkRemoveHopByHopLongConnection(b *testing.B) {
	src := longConnectionHeader()
	for b.Loop() {
		removeHopByHop(src.Clone())
	}
}

// isHopByHop's switch names every field of the hopByHopFields table that
// isHopByHopFold reads, and isHopByHopFold finds them in any case.
func TestHopByHopNamesAgree(t *testing.T) {
	for _, f := range hopByHopFields {
		if !isHopByHop(f) || !isHopByHopFold(strings.ToLower(f)) {
			t.Errorf("%s: isHopByHop %v, isHopByHopFold(lower case) %v", f, isHopByHop(f), isHopByHopFold(strings.ToLower(f)))
		}
	}
	for _, k := range []string{"X-Other", "Tee", "Keep-Alives"} {
		if isHopByHop(k) || isHopByHopFold(k) {
			t.Errorf("%s taken for hop-by-hop", k)
		}
	}
}
