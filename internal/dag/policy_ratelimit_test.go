package dag

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/testutil"
)

func TestHTTPProxyLocalRateLimit(t *testing.T) {
	cert := testutil.SelfSigned("rl.example.com")
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: rl.example.com
    tls: {secretName: cert}
    rateLimitPolicy:
      local: {requests: 10, unit: minute, burst: 5}
  routes:
  - conditions: [{prefix: /limited}]
    services: [{name: web, port: 80}]
    rateLimitPolicy:
      local:
        requests: 2
        unit: hour
        responseStatusCode: 503
        responseHeadersToAdd: [{name: x-limited, value: "100%"}]
  - services: [{name: web, port: 80}]
`), tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM))
	wantProxy(t, g, "default", "root", StatusValid)
	host := &RateLimitPolicy{Local: &LocalRateLimit{MaxTokens: 15, TokensPerFill: 10, FillInterval: time.Minute, Status: 429}}
	route := &RateLimitPolicy{Local: &LocalRateLimit{
		MaxTokens: 2, TokensPerFill: 2, FillInterval: time.Hour, Status: 503,
		ResponseHeaders: []HeaderValue{{Name: "X-Limited", Value: "100%%"}},
	}}
	svh := httpsHost(g, "rl.example.com")
	if svh == nil {
		t.Fatal("rl.example.com is not served over HTTPS")
	}
	if diff := cmp.Diff(host, svh.RateLimit); diff != "" {
		t.Errorf("secure virtual host's policy (-want +got):\n%s", diff)
	}
	if vh := httpHost(g, "rl.example.com"); vh == nil || !cmp.Equal(host, vh.RateLimit) {
		t.Errorf("the plain virtual host (HTTPS redirects) does not have the host's policy: %+v", vh)
	}
	if len(svh.Routes) != 2 {
		t.Fatalf("%d routes, want 2", len(svh.Routes))
	}
	if diff := cmp.Diff(route, svh.Routes[0].RateLimit); diff != "" {
		t.Errorf("/limited's policy (-want +got):\n%s", diff)
	}
	if svh.Routes[1].RateLimit != nil {
		t.Errorf("/ has a policy of its own (%+v); it must use the host's", svh.Routes[1].RateLimit)
	}
}

func TestHTTPProxyLocalRateLimitInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		want         []string
	}{
		{"unit", `{local: {requests: 1, unit: day}}`, []string{`.local.unit "day" must be second, minute or hour`}},
		{"no unit", `{local: {requests: 1}}`, []string{`.local.unit "" must be`}},
		{"zero requests", `{local: {requests: 0, unit: second}}`, []string{".local.requests must be at least 1"}},
		{"status not an error", `{local: {requests: 1, unit: second, responseStatusCode: 302}}`, []string{".local.responseStatusCode 302 is not a 4xx or 5xx status"}},
		{"status Envoy cannot send", `{local: {requests: 1, unit: second, responseStatusCode: 418}}`, []string{".local.responseStatusCode 418"}},
		{"header name", `{local: {requests: 1, unit: second, responseHeadersToAdd: [{name: "x y", value: v}]}}`, []string{`.local.responseHeadersToAdd[0].name: "x y" is not a valid header name`}},
		{"hop-by-hop header", `{local: {requests: 1, unit: second, responseHeadersToAdd: [{name: connection, value: close}]}}`, []string{".local.responseHeadersToAdd[0].name: Connection is a hop-by-hop header"}},
		{"header value", `{local: {requests: 1, unit: second, responseHeadersToAdd: [{name: x, value: "a\nb"}]}}`, []string{".local.responseHeadersToAdd[0].value must be non-empty, without CR, LF or NUL"}},
		{"overflow", `{local: {requests: 4294967295, unit: second, burst: 1}}`, []string{"requests plus burst is 4294967296"}},
		{"empty", `{}`, []string{"needs local or global"}},
		{"global without descriptors", `{global: {}}`, []string{".global needs descriptors (or disabled: true)"}},
		{"empty descriptor", `{global: {descriptors: [{entries: []}]}}`, []string{".global.descriptors[0].entries: a descriptor needs at least one entry"}},
		{"two kinds in an entry", `{global: {descriptors: [{entries: [{remoteAddress: {}, genericKey: {value: a}}]}]}}`, []string{".global.descriptors[0].entries[0] must set exactly one of genericKey, requestHeader, requestHeaderValueMatch, remoteAddress (it sets 2)"}},
		{"generic key without value", `{global: {descriptors: [{entries: [{genericKey: {key: k}}]}]}}`, []string{".global.descriptors[0].entries[0].genericKey.value is required"}},
		{"bad header name", `{global: {descriptors: [{entries: [{requestHeader: {headerName: "x y", descriptorKey: k}}]}]}}`, []string{`.global.descriptors[0].entries[0].requestHeader.headerName "x y" is not a valid header name`}},
		{"header without key", `{global: {descriptors: [{entries: [{requestHeader: {headerName: x-user}}]}]}}`, []string{".global.descriptors[0].entries[0].requestHeader.descriptorKey is required"}},
		{"bad header match", `{global: {descriptors: [{entries: [{requestHeaderValueMatch: {value: v, headers: [{name: x-a, regex: "(unclosed"}]}}]}]}}`, []string{".global.descriptors[0].entries[0].requestHeaderValueMatch.headers[0]: regex"}},
	} {
		for _, at := range []struct{ where, field string }{
			{"virtualhost", "spec.virtualhost.rateLimitPolicy"},
			{"route", "spec.routes[0].rateLimitPolicy"},
		} {
			t.Run(tc.name+" on "+at.where, func(t *testing.T) {
				vh, route := "", ""
				if at.where == "virtualhost" {
					vh = ", rateLimitPolicy: " + tc.policy
				} else {
					route = "\n    rateLimitPolicy: " + tc.policy
				}
				p := proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: rl.example.com`+vh+`}
  routes:
  - services: [{name: web, port: 80}]`+route+"\n")
				want := make([]string, len(tc.want))
				for i, w := range tc.want {
					want[i] = at.field + w
					if strings.HasPrefix(w, " ") || !strings.HasPrefix(w, ".") {
						want[i] = w
					}
				}
				g := build(p)
				wantInvalid(t, g, "default", "root", problemSpec, "RateLimitPolicyInvalid", want...)
				if vh := httpHost(g, "rl.example.com"); vh != nil {
					t.Errorf("served with an invalid rate limit: %+v", vh)
				}
				// The admission webhook refuses it on its own.
				v := ValidateObject(p, nil, Options{})
				if !v.Ours || len(v.Problems) == 0 || !strings.Contains(strings.Join(v.Problems, "\n"), want[0]) {
					t.Errorf("ValidateObject = %+v, want a problem containing %q", v, want[0])
				}
			})
		}
	}
}

func TestHTTPProxyGlobalRateLimit(t *testing.T) {
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: rl.example.com
    rateLimitPolicy:
      global:
        descriptors:
        - entries: [{genericKey: {value: host}}]
  routes:
  - conditions: [{prefix: /own}]
    services: [{name: web, port: 80}]
    rateLimitPolicy:
      global:
        descriptors:
        - entries:
          - remoteAddress: {}
          - requestHeader: {headerName: X-User, descriptorKey: user}
          - requestHeaderValueMatch: {value: beta, headers: [{name: x-channel, present: true}]}
          - requestHeaderValueMatch: {value: other, expectMatch: false, headers: [{name: x-channel, exact: stable}]}
  - conditions: [{prefix: /off}]
    services: [{name: web, port: 80}]
    rateLimitPolicy: {global: {disabled: true}}
`))
	wantProxy(t, g, "default", "root", StatusValid)
	vh := httpHost(g, "rl.example.com")
	if vh == nil {
		t.Fatal("rl.example.com is not served")
	}
	wantHost := &RateLimitPolicy{Global: &GlobalRateLimit{Descriptors: []RateLimitDescriptor{{Entries: []RateLimitEntry{{GenericKey: &GenericKeyEntry{Key: "generic_key", Value: "host"}}}}}}}
	if diff := cmp.Diff(wantHost, vh.RateLimit); diff != "" {
		t.Errorf("host policy (-want +got):\n%s", diff)
	}
	wantOwn := &RateLimitPolicy{Global: &GlobalRateLimit{Descriptors: []RateLimitDescriptor{{Entries: []RateLimitEntry{
		{RemoteAddress: true},
		{RequestHeader: &RequestHeaderEntry{Header: "x-user", Key: "user"}},
		{HeaderValueMatch: &HeaderValueMatchEntry{Value: "beta", ExpectMatch: true, Headers: []HeaderMatch{{Name: "x-channel", Kind: MatchPresent}}}},
		{HeaderValueMatch: &HeaderValueMatchEntry{Value: "other", ExpectMatch: false, Headers: []HeaderMatch{{Name: "x-channel", Kind: MatchExact, Value: "stable"}}}},
	}}}}}
	byPath := map[string]*Route{}
	for _, r := range vh.Routes {
		byPath[r.Path.Value] = r
	}
	if diff := cmp.Diff(wantOwn, byPath["/own"].RateLimit); diff != "" {
		t.Errorf("/own policy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&RateLimitPolicy{Global: &GlobalRateLimit{Disabled: true}}, byPath["/off"].RateLimit); diff != "" {
		t.Errorf("/off policy (-want +got):\n%s", diff)
	}
}

func TestHTTPProxyDefaultGlobalRateLimit(t *testing.T) {
	def, err := ParseDefaultGlobalRateLimit(&contourv1.GlobalRateLimitPolicy{Descriptors: []contourv1.RateLimitDescriptor{{
		Entries: []contourv1.RateLimitDescriptorEntry{{RemoteAddress: &contourv1.RemoteAddressDescriptor{}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	root := func(name, policy string) *contourv1.HTTPProxy {
		return proxy(t, `
metadata: {name: `+name+`}
spec:
  virtualhost: {fqdn: `+name+`.example.com`+policy+`}
  routes: [{services: [{name: web, port: 80}]}]
`)
	}
	g := buildWith(Options{DefaultGlobalRateLimit: def},
		root("plain", ""),
		root("own", `, rateLimitPolicy: {global: {descriptors: [{entries: [{genericKey: {value: own}}]}]}}`),
		root("optout", `, rateLimitPolicy: {global: {disabled: true}}`),
		root("local", `, rateLimitPolicy: {local: {requests: 1, unit: hour}}`),
	)
	policy := func(host string) *RateLimitPolicy {
		vh := httpHost(g, host+".example.com")
		if vh == nil {
			t.Fatalf("%s is not served", host)
		}
		return vh.RateLimit
	}
	if p := policy("plain"); p == nil || p.Global != def {
		t.Errorf("a host without a policy: %+v, want the default", p)
	}
	if p := policy("own"); p == nil || p.Global == def || p.Global.Descriptors[0].Entries[0].GenericKey == nil {
		t.Errorf("a host with its own global policy: %+v, want its own", p)
	}
	if p := policy("optout"); p == nil || p.Global == nil || !p.Global.Disabled || len(p.Global.Descriptors) > 0 {
		t.Errorf("a host with global.disabled: %+v, want no descriptors", p)
	}
	if p := policy("local"); p == nil || p.Local == nil || p.Global != def {
		t.Errorf("a host with a local policy only: %+v, want its local policy and the default global one", p)
	}
	if _, err := ParseDefaultGlobalRateLimit(&contourv1.GlobalRateLimitPolicy{}); err == nil || !strings.Contains(err.Error(), "default global rate limit policy needs descriptors") {
		t.Errorf("an empty default policy: %v", err)
	}
}

// Without a rate limit service, a global policy is valid but its status says nothing
// enforces it; with one, no warning.
func TestHTTPProxyGlobalRateLimitWithoutService(t *testing.T) {
	p := proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: rl.example.com
    rateLimitPolicy: {global: {descriptors: [{entries: [{remoteAddress: {}}]}]}}
  routes:
  - services: [{name: web, port: 80}]
    rateLimitPolicy: {global: {disabled: true}}
`)
	wantWarning(t, build(p), "default", "root", problemUnsupported, "RateLimitServiceMissing",
		"spec.virtualhost.rateLimitPolicy.global is not enforced: Portico runs without a rate limit service (--rate-limit-service)")
	if v := ValidateObject(p, nil, Options{}); len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "is not enforced") {
		t.Errorf("the webhook's notes %q, want the warning", v.Notes)
	}
	s := proxyStatus(t, buildWith(Options{RateLimitService: true}, p), "default", "root")
	for _, w := range s.Warnings {
		if w.Reason == "RateLimitServiceMissing" {
			t.Errorf("with a service: warning %+v", w)
		}
	}
	if s.Status != StatusValid {
		t.Errorf("with a service: %s, want valid", s.Status)
	}
}
