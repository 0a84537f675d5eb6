package extauthz

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// oneServer reaches every cluster at one address, as a cluster of one endpoint.
type oneServer struct{ addr string }

func (u oneServer) GRPC(string) (grpc.ClientConnInterface, error) { return nil, net.ErrClosed }
func (u oneServer) Dial(ctx context.Context, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", u.addr)
}
func (u oneServer) HTTP(string) (*http.Client, error) {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return u.Dial(ctx, "") }}}, nil
}

// seen is what an authorization server received.
type seen struct {
	method, path, host string
	header             http.Header
	body               []byte
}

// authServer is a real HTTP server answering with answer and recording requests.
func authServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) (string, func() seen) {
	t.Helper()
	var mu sync.Mutex
	var last seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = seen{r.Method, r.URL.RequestURI(), r.Host, r.Header.Clone(), body}
		mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), func() seen { mu.Lock(); defer mu.Unlock(); return last }
}

func exact(name string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: name}}
}

func prefix(name string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: name}}
}

// newHTTPFilter is a filter for an http_service configured by edit.
func newHTTPFilter(t *testing.T, edit func(*extauthzv3.ExtAuthz)) *Filter {
	t.Helper()
	cfg := &extauthzv3.ExtAuthz{Services: httpServiceConfig("authz", "http://dummy/"), TransportApiVersion: corev3.ApiVersion_V3}
	if edit != nil {
		edit(cfg)
	}
	f, err := Factory{}.New(packed(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return f.(*Filter)
}

// stream is a POST of body to a.example.com/p?q=1 with headers h.
func stream(addr string, h filter.HeaderMap, body string) *filter.Stream {
	s := filter.NewStream(context.Background(), &filter.Env{Upstreams: oneServer{addr}})
	s.Request = filter.Request{Method: "POST", Scheme: "https", Authority: "a.example.com", Path: "/p", RawQuery: "q=1", Headers: h}
	if body != "" {
		s.SetBody(strings.NewReader(body), int64(len(body)))
	}
	return s
}

// The check request: same method, the path under path_prefix, Host, Authorization and
// the allowed headers only, and no body without with_request_body.
func TestHTTPCheckRequest(t *testing.T) {
	addr, last := authServer(t, func(w http.ResponseWriter, _ *http.Request) {})
	f := newHTTPFilter(t, func(c *extauthzv3.ExtAuthz) {
		c.GetHttpService().PathPrefix = "/check"
		c.AllowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{exact("x-allowed"), prefix("x-pre-")}}
	})
	s := stream(addr, filter.HeaderMap{"Authorization": {"Basic eA=="}, "X-Allowed": {"1", "2"}, "X-Pre-A": {"a"}, "X-Other": {"no"}, "Cookie": {"c"}}, "the body")
	if lr := f.DecodeHeaders(s, nil); lr != nil {
		t.Fatalf("allowed request answered %+v", lr)
	}
	got := last()
	if got.method != "POST" || got.path != "/check/p?q=1" || got.host != "a.example.com" || len(got.body) != 0 {
		t.Errorf("check %s %s host %s body %q", got.method, got.path, got.host, got.body)
	}
	for name, want := range map[string]string{"Authorization": "Basic eA==", "X-Allowed": "1,2", "X-Pre-A": "a", "X-Other": "", "Cookie": "", "User-Agent": "", PartialBodyHeader: ""} {
		if v := got.header.Get(name); v != want {
			t.Errorf("check header %s = %q, want %q", name, v, want)
		}
	}
	if _, read := s.Buffered(); read {
		t.Error("the body was read without with_request_body")
	}
}

// 200 allows: only allowed_upstream_headers reach the upstream request, and the headers
// x-envoy-auth-headers-to-remove names are removed.
func TestHTTPAllowed(t *testing.T) {
	addr, _ := authServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Auth-Username", "alice")
		w.Header().Set("X-Secret", "s")
		w.Header().Set(headersToRemoveHeader, "x-drop")
	})
	f := newHTTPFilter(t, func(c *extauthzv3.ExtAuthz) {
		c.GetHttpService().AuthorizationResponse = &extauthzv3.AuthorizationResponse{
			AllowedUpstreamHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{exact("auth-username")}},
		}
	})
	h := filter.HeaderMap{"Auth-Username": {"forged"}, "X-Drop": {"d"}}
	if lr := f.DecodeHeaders(stream(addr, h, ""), nil); lr != nil {
		t.Fatalf("answered %+v", lr)
	}
	if len(h) != 1 || h.Get("Auth-Username") != "alice" {
		t.Errorf("upstream headers %v, want only Auth-Username: alice", h)
	}
}

// Any other status denies, with the server's status, body and headers (but Host).
func TestHTTPDenied(t *testing.T) {
	addr, _ := authServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="r"`)
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "who are you?")
	})
	lr := newHTTPFilter(t, nil).DecodeHeaders(stream(addr, filter.HeaderMap{}, ""), nil)
	if lr == nil || lr.Status != 401 || lr.Body != "who are you?" || lr.Details != detailsDenied {
		t.Fatalf("reply %+v", lr)
	}
	got := map[string][]string{}
	for _, hv := range lr.Headers {
		got[hv.Name] = append(got[hv.Name], hv.Value)
	}
	if got["Www-Authenticate"][0] != `Basic realm="r"` || len(got["Set-Cookie"]) != 2 || got["Content-Length"] != nil {
		t.Errorf("reply headers %v", got)
	}
}

// A 5xx answer, a server that is not there and one that answers too late are errors:
// status_on_error, or through with failure_mode_allow (marked for the upstream).
func TestHTTPErrors(t *testing.T) {
	failing, _ := authServer(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	slow, _ := authServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	for name, addr := range map[string]string{"5xx": failing, "slow": slow, "down": down} {
		t.Run(name, func(t *testing.T) {
			f := newHTTPFilter(t, func(c *extauthzv3.ExtAuthz) {
				c.GetHttpService().GetServerUri().Timeout = durationpb.New(200 * time.Millisecond)
			})
			if lr := f.DecodeHeaders(stream(addr, filter.HeaderMap{}, ""), nil); lr == nil || lr.Status != 403 || lr.Details != detailsError {
				t.Errorf("closed: reply %+v, want 403", lr)
			}
			f.failOpen = true
			h := filter.HeaderMap{}
			if lr := f.DecodeHeaders(stream(addr, h, ""), nil); lr != nil || h.Get(failureModeAllowedHeader) != "" {
				t.Errorf("open: reply %+v, headers %v: want through, unmarked without failure_mode_allow_header_add (as Envoy)", lr, h)
			}
			f.markFailOpen = true
			if lr := f.DecodeHeaders(stream(addr, h, ""), nil); lr != nil || h.Get(failureModeAllowedHeader) != "true" {
				t.Errorf("open, marked: reply %+v, headers %v", lr, h)
			}
		})
	}
}

// with_request_body: the body up to max_request_bytes reaches the server with
// x-envoy-auth-partial-body, and still reaches the upstream whole; a longer one is
// refused with 413, or cut with allow_partial_message.
func TestHTTPWithRequestBody(t *testing.T) {
	addr, last := authServer(t, func(w http.ResponseWriter, _ *http.Request) {})
	for _, tc := range []struct {
		name    string
		partial bool
		body    string
		status  int
		sent    string
		flag    string
	}{
		{"fits", false, "0123456789", 0, "0123456789", "false"},
		{"too large", false, "0123456789a", 413, "", ""},
		{"partial", true, "0123456789abc", 0, "0123456789", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newHTTPFilter(t, func(c *extauthzv3.ExtAuthz) {
				c.WithRequestBody = &extauthzv3.BufferSettings{MaxRequestBytes: 10, AllowPartialMessage: tc.partial}
			})
			s := stream(addr, filter.HeaderMap{}, tc.body)
			// An undeclared length: the body must be read to be measured.
			s.SetBody(strings.NewReader(tc.body), -1)
			lr := f.DecodeHeaders(s, nil)
			if tc.status != 0 {
				if lr == nil || lr.Status != tc.status {
					t.Fatalf("reply %+v, want %d", lr, tc.status)
				}
				return
			}
			if lr != nil {
				t.Fatalf("reply %+v", lr)
			}
			got := last()
			if string(got.body) != tc.sent || got.header.Get(PartialBodyHeader) != tc.flag || got.header.Get("Content-Length") != "10" {
				t.Errorf("server got body %q, %s %q, content-length %q", got.body, PartialBodyHeader, got.header.Get(PartialBodyHeader), got.header.Get("Content-Length"))
			}
			if buf, read := s.Buffered(); !read || !strings.HasPrefix(tc.body, string(buf)) || len(buf) < len(tc.sent) {
				t.Errorf("buffered %q of %q", buf, tc.body)
			}
		})
	}
}

// A redirect denies: the client gets it (a login page), the proxy does not follow it.
func TestHTTPRedirectDenies(t *testing.T) {
	addr, _ := authServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" {
			return // 200: following the redirect would allow the request
		}
		http.Redirect(w, r, "/login", http.StatusFound)
	})
	lr := newHTTPFilter(t, nil).DecodeHeaders(stream(addr, filter.HeaderMap{}, ""), nil)
	if lr == nil || lr.Status != http.StatusFound {
		t.Fatalf("reply %+v, want the server's 302", lr)
	}
	found := false
	for _, hv := range lr.Headers {
		found = found || (hv.Name == "Location" && hv.Value == "/login")
	}
	if !found {
		t.Errorf("reply headers %v, want Location: /login", lr.Headers)
	}
}

// An HTTP server's answer cannot set Host or framing headers on the upstream request,
// even when allowed_upstream_headers matches every name, nor on a denial.
func TestHTTPAnswersNeverSetFramingOrRouting(t *testing.T) {
	status := http.StatusOK
	addr, _ := authServer(t, func(w http.ResponseWriter, _ *http.Request) {
		for _, name := range framingAndRouting {
			if !strings.HasPrefix(name, ":") && name != "content-length" && name != "transfer-encoding" {
				w.Header().Set(name, "evil")
			}
		}
		w.Header().Set("X-Ok", "1")
		w.WriteHeader(status)
	})
	all := &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{prefix("")}}
	f := newHTTPFilter(t, func(c *extauthzv3.ExtAuthz) {
		c.GetHttpService().AuthorizationResponse = &extauthzv3.AuthorizationResponse{
			AllowedUpstreamHeaders: all, AllowedUpstreamHeadersToAppend: all, AllowedClientHeadersOnSuccess: all,
		}
	})
	h := filter.HeaderMap{}
	s := stream(addr, h, "")
	if lr := f.DecodeHeaders(s, nil); lr != nil {
		t.Fatalf("answered %+v", lr)
	}
	for name := range h {
		if name != "X-Ok" && name != "Date" {
			t.Errorf("upstream request got %s: %q", name, h[name])
		}
	}
	for _, hv := range s.ResponseHeaders() {
		if !strings.EqualFold(hv.Name, "X-Ok") && !strings.EqualFold(hv.Name, "Date") {
			t.Errorf("client response got %s: %q", hv.Name, hv.Value)
		}
	}
	status = http.StatusUnauthorized
	lr := f.DecodeHeaders(stream(addr, filter.HeaderMap{}, ""), nil)
	for _, hv := range lr.Headers {
		if slices.Contains(framingAndRouting, strings.ToLower(hv.Name)) {
			t.Errorf("denial sets %s: %q", hv.Name, hv.Value)
		}
	}
}

// The check request carries none of the client's hop-by-hop headers, even when
// allowed_headers matches every name: they concern the client's connection, and an
// Upgrade would ask the authorization server to switch protocols.
func TestHTTPCheckRequestWithoutHopByHop(t *testing.T) {
	addr, last := authServer(t, func(http.ResponseWriter, *http.Request) {})
	f := newHTTPFilter(t, func(c *extauthzv3.ExtAuthz) {
		c.AllowedHeaders = &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{prefix("")}}
	})
	h := filter.HeaderMap{"Connection": {"Upgrade, X-A"}, "Upgrade": {"websocket"}, "Keep-Alive": {"timeout=5"}, "Te": {"trailers"}, "X-A": {"a"}}
	if lr := f.DecodeHeaders(stream(addr, h, ""), nil); lr != nil {
		t.Fatalf("answered %+v", lr)
	}
	got := last().header
	for _, name := range []string{"Connection", "Upgrade", "Keep-Alive", "Te"} {
		if v := got.Get(name); v != "" {
			t.Errorf("the check carried %s: %q", name, v)
		}
	}
	if got.Get("X-A") != "a" {
		t.Errorf("the check lost X-A: %v", got)
	}
}
