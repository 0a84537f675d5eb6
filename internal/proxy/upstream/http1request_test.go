package upstream

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

// writeRequestHead writes what http.Request.Write writes for the requests
// the client exchanges itself (no body).
func TestWriteRequestHeadLikeNetHTTP(t *testing.T) {
	req := func(method, url string, hdr http.Header, mutate func(*http.Request)) *http.Request {
		r, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			r.Header[k] = v
		}
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	for name, r := range map[string]*http.Request{
		"get":             req("GET", "http://10.0.0.1:8080/a/b?q=1", http.Header{"X-B": {"2"}, "X-A": {"1", "one"}, "User-Agent": {""}}, nil),
		"default agent":   req("GET", "http://10.0.0.1/", nil, nil),
		"agent":           req("HEAD", "http://10.0.0.1/", http.Header{"User-Agent": {" curl/8 "}}, nil),
		"delete":          req("DELETE", "http://10.0.0.1/x", nil, nil),
		"options":         req("OPTIONS", "http://10.0.0.1/x", nil, nil),
		"post no body":    req("POST", "http://10.0.0.1/x", nil, nil),
		"host override":   req("GET", "http://10.0.0.1/", nil, func(r *http.Request) { r.Host = "example.com" }),
		"escaped path":    req("GET", "http://10.0.0.1/a%2Fb/c%20d", nil, nil),
		"empty path":      req("GET", "http://10.0.0.1", nil, nil),
		"line break":      req("GET", "http://10.0.0.1/", http.Header{"X-Multi": {"a\r\nb"}}, nil),
		"framing dropped": req("GET", "http://10.0.0.1/", http.Header{"Content-Length": {"5"}, "Trailer": {"X"}, "Host": {"other"}}, nil),
		"close":           req("GET", "http://10.0.0.1/", nil, func(r *http.Request) { r.Close = true }),
		"ipv6 zone":       req("GET", "http://[fe80::1%25en0]:80/", nil, nil),
		"idn":             req("GET", "http://bücher.example/", nil, nil),
	} {
		t.Run(name, func(t *testing.T) {
			var want bytes.Buffer
			if err := r.Write(&want); err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			w := bufio.NewWriter(&got)
			if _, err := writeRequestHead(w, r, nil); err != nil {
				t.Fatal(err)
			}
			_ = w.Flush()
			if got.String() != want.String() {
				t.Errorf("got\n%q\nnet/http writes\n%q", got.String(), want.String())
			}
		})
	}
	bad := req("GET", "http://10.0.0.1/", nil, func(r *http.Request) { r.Host = "a b" })
	if _, err := writeRequestHead(bufio.NewWriter(&bytes.Buffer{}), bad, nil); err == nil {
		t.Error("an invalid Host was written")
	}
}
