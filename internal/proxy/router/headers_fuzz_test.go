package router

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzParseHeaderFormat: whatever a header value says, parsing it never panics, nor does
// evaluating what parsed, on a request with and without the headers it names; and a
// value with every '%' doubled is sent exactly as written before the doubling.
func FuzzParseHeaderFormat(f *testing.F) {
	for _, s := range []string{
		"%REQ(x-in)%", "%REQ(:authority?x-alt):3%", "%REQ(Host)%", "%PROTOCOL%", "%HOSTNAME%",
		"%REQ(x):99999999999999999999%", "%RESPONSE_FLAGS%|%UPSTREAM_REMOTE_ADDRESS%", "50%%", "%", "%REQ()%",
		"%DOWNSTREAM_PEER_SUBJECT%%DOWNSTREAM_LOCAL_PORT%", "%REQ(a?b?c)%", "%START_TIME%", "%PROTOCOL(x)%",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := httptest.NewRequest(http.MethodGet, "http://h.example.com/p", nil)
		r.Header.Set("X-In", "value")
		ri := &RequestInfo{Method: "GET", Scheme: "http", Authority: "h.example.com", Path: "/p", Header: r.Header}
		rh := NewRouteHeaders(nil, r, ri, &ClientAddressing{})
		rh.Stream = &StreamInfo{UpstreamHost: "10.0.0.1:80", ResponseFlags: "UH", Details: "no_healthy_upstream"}
		if f, err := parseHeaderFormat(s); err == nil {
			rh.request = r.Header
			_ = f.eval(rh)
			rh.responding = true
			_ = f.eval(rh)
		}
		escaped := strings.ReplaceAll(s, "%", "%%")
		f, err := parseHeaderFormat(escaped)
		if err != nil {
			t.Fatalf("%q: %v", escaped, err)
		}
		if got := f.eval(rh); got != s {
			t.Fatalf("%q gives %q, want %q", escaped, got, s)
		}
	})
}
