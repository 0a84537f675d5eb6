package cors

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func regex(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: s}}}
}

func compile(t *testing.T, p *corsv3.CorsPolicy) any {
	t.Helper()
	a, err := anypb.New(p)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Factory{}.ParsePerRoute(a)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// result is what the client sees of the filter: its reply (nil: the request goes
// on) and the headers every response gets.
type result struct {
	Reply    *filter.LocalReply
	Response map[string]string
}

func run(cfg any, method string, headers map[string]string) result {
	h := filter.HeaderMap{}
	for k, v := range headers {
		h.Set(k, v)
	}
	s := filter.NewStream(context.Background(), &filter.Env{})
	s.Request = filter.Request{Method: method, Headers: h}
	lr := Filter{}.DecodeHeaders(s, cfg)
	r := result{Reply: lr, Response: map[string]string{}}
	if lr != nil {
		for _, hv := range lr.Headers {
			r.Response[http.CanonicalHeaderKey(hv.Name)] = hv.Value
		}
	}
	for _, hv := range s.ResponseHeaders() {
		r.Response[http.CanonicalHeaderKey(hv.Name)] = hv.Value
	}
	return r
}

func TestPreflightAndActualRequests(t *testing.T) {
	policy := compile(t, &corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://app.example.com"), regex(`https://.*\.example\.org`)},
		AllowMethods:           "GET,POST", AllowHeaders: "authorization", ExposeHeaders: "x-total", MaxAge: "600",
		AllowCredentials: wrapperspb.Bool(true), AllowPrivateNetworkAccess: wrapperspb.Bool(true),
	})
	preflightHeaders := map[string]string{
		"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods": "GET,POST", "Access-Control-Allow-Headers": "authorization",
		"Access-Control-Max-Age": "600", "Access-Control-Expose-Headers": "x-total",
	}
	for _, tc := range []struct {
		name     string
		method   string
		headers  map[string]string
		reply    bool
		response map[string]string
	}{
		{name: "preflight", method: "OPTIONS", headers: map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST"},
			reply: true, response: preflightHeaders},
		{name: "private network preflight", method: "OPTIONS", headers: map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST", "Access-Control-Request-Private-Network": "true"},
			reply: true, response: func() map[string]string {
				m := map[string]string{"Access-Control-Allow-Private-Network": "true"}
				for k, v := range preflightHeaders {
					m[k] = v
				}
				return m
			}()},
		{name: "regex origin, actual request", method: "GET", headers: map[string]string{"Origin": "https://a.b.example.org"},
			response: map[string]string{"Access-Control-Allow-Origin": "https://a.b.example.org", "Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "x-total"}},
		{name: "regex matches whole origin only", method: "GET", headers: map[string]string{"Origin": "https://a.example.org.evil.com"}, response: map[string]string{}},
		{name: "disallowed origin preflight goes upstream", method: "OPTIONS", headers: map[string]string{"Origin": "https://evil.com", "Access-Control-Request-Method": "POST"}, response: map[string]string{}},
		{name: "OPTIONS without request method is not a preflight", method: "OPTIONS", headers: map[string]string{"Origin": "https://app.example.com"},
			response: map[string]string{"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "x-total"}},
		{name: "no origin", method: "OPTIONS", headers: map[string]string{"Access-Control-Request-Method": "POST"}, response: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := run(policy, tc.method, tc.headers)
			if (got.Reply != nil) != tc.reply {
				t.Fatalf("answered = %v, want %v", got.Reply != nil, tc.reply)
			}
			if got.Reply != nil && (got.Reply.Status != 200 || got.Reply.Body != "" || got.Reply.Details != "cors_response" || !got.Reply.Bare) {
				t.Errorf("reply %+v, want an empty bare 200 (cors_response)", got.Reply)
			}
			if diff := cmp.Diff(tc.response, got.Response); diff != "" {
				t.Errorf("response headers (-want +got):\n%s", diff)
			}
		})
	}
}

// "*" methods and headers echo what the preflight asks for; an "*" origin allows
// any origin and echoes it; without credentials there is no credentials header.
func TestWildcards(t *testing.T) {
	policy := compile(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("*")}, AllowMethods: "*", AllowHeaders: "*"})
	got := run(policy, "OPTIONS", map[string]string{"Origin": "https://x.test:8443", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-a, x-b"})
	want := map[string]string{"Access-Control-Allow-Origin": "https://x.test:8443", "Access-Control-Allow-Methods": "PUT", "Access-Control-Allow-Headers": "x-a, x-b"}
	if got.Reply == nil {
		t.Fatal("preflight not answered")
	}
	if diff := cmp.Diff(want, got.Response); diff != "" {
		t.Errorf("response headers (-want +got):\n%s", diff)
	}
}

// With forward_not_matching_preflights false, a preflight from another origin is
// answered without allowing it.
func TestRefusedPreflightAnswered(t *testing.T) {
	policy := compile(t, &corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://a.test")}, AllowMethods: "GET", ForwardNotMatchingPreflights: wrapperspb.Bool(false)})
	got := run(policy, "OPTIONS", map[string]string{"Origin": "https://b.test", "Access-Control-Request-Method": "GET"})
	if got.Reply == nil || got.Response["Access-Control-Allow-Origin"] != "" {
		t.Errorf("got %+v, want a reply without Access-Control-Allow-Origin", got)
	}
}

func TestUnsupportedIsRefused(t *testing.T) {
	for _, tc := range []struct {
		p    *corsv3.CorsPolicy
		want string
	}{
		{&corsv3.CorsPolicy{FilterEnabled: &corev3.RuntimeFractionalPercent{}}, "filter_enabled"},
		{&corsv3.CorsPolicy{AllowOriginStringMatch: []*matcherv3.StringMatcher{regex("(")}}, "allow_origin_string_match[0]: safe_regex"},
	} {
		a, _ := anypb.New(tc.p)
		if _, err := (Factory{}).ParsePerRoute(a); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one naming %q", err, tc.want)
		}
	}
}

// BenchmarkDecodeHeaders is the filter's cost per request from an origin a
// regex allows: an actual request (headers for the response) and a preflight
// (the proxy's answer).
func BenchmarkDecodeHeaders(b *testing.B) {
	a, _ := anypb.New(&corsv3.CorsPolicy{
		AllowOriginStringMatch: []*matcherv3.StringMatcher{exact("https://other.example.com"), regex(`https://.*\.example\.com`)},
		AllowMethods:           "GET,POST", ExposeHeaders: "x-total", AllowCredentials: wrapperspb.Bool(true), MaxAge: "600",
	})
	cfg, err := Factory{}.ParsePerRoute(a)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name, method string
		headers      filter.HeaderMap
	}{
		{"actual", "GET", filter.HeaderMap{"Origin": {"https://app.example.com"}}},
		{"preflight", "OPTIONS", filter.HeaderMap{"Origin": {"https://app.example.com"}, "Access-Control-Request-Method": {"POST"}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := filter.NewStream(context.Background(), &filter.Env{})
				s.Request = filter.Request{Method: tc.method, Headers: tc.headers}
				Filter{}.DecodeHeaders(s, cfg)
			}
		})
	}
}
