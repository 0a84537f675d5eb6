package dag

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/portico-dev/portico/internal/testutil"
)

func TestParseCIDR(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"192.168.1.7", "192.168.1.7/32"},
		{" 192.168.1.7 ", "192.168.1.7/32"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"::1", "::1/128"},
		{"::ffff:10.0.0.1", "10.0.0.1/32"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
	} {
		got, err := ParseCIDR(tc.in)
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseCIDR(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "10.0.0.0/33", "10.0.0", "fe80::1%eth0", "fe80::1%eth0/64", "example.com", "10.0.0.0/", "::/129"} {
		if p, err := ParseCIDR(bad); err == nil {
			t.Errorf("ParseCIDR(%q) = %v, want an error", bad, p)
		}
	}
}

func FuzzParseCIDR(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "1.2.3.4", "::1", "2001:db8::/32", "::ffff:1.2.3.4/120", "fe80::1%x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseCIDR(s)
		if err != nil {
			return
		}
		// What is accepted is a canonical block the translator can write and read back.
		if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			t.Fatalf("ParseCIDR(%q) = %v: not a canonical block", s, p)
		}
		back, err := netip.ParsePrefix(p.String())
		if err != nil || back != p {
			t.Fatalf("ParseCIDR(%q) = %v does not read back (%v, %v)", s, p, back, err)
		}
	})
}

func FuzzParseCORSOrigin(f *testing.F) {
	for _, s := range []string{"*", "https://a.example.com", "http://a:8080", `https://.*\.example\.com`, "*.example.com", "(", "https://a/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseCORSOrigin(s)
		if err != nil {
			return
		}
		kinds := 0
		for _, set := range []bool{o.Any, o.Exact != "", o.Regex != ""} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			t.Fatalf("ParseCORSOrigin(%q) = %+v: not exactly one kind", s, o)
		}
		if o.Regex != "" {
			if _, err := regexp.Compile(`^(?:` + o.Regex + `)$`); err != nil {
				t.Fatalf("ParseCORSOrigin(%q) accepted a regex the data plane cannot compile: %v", s, err)
			}
		}
		if o.Exact != "" && strings.ContainsAny(o.Exact, "/?#") && !strings.Contains(o.Exact, "://") {
			t.Fatalf("ParseCORSOrigin(%q) = exact %q, not an origin", s, o.Exact)
		}
	})
}

func TestParseCORSOrigin(t *testing.T) {
	for in, want := range map[string]CORSOrigin{
		"*":                            {Any: true},
		"https://app.example.com":      {Exact: "https://app.example.com"},
		"http://localhost:3000":        {Exact: "http://localhost:3000"},
		"https://[2001:db8::1]:8443":   {Exact: "https://[2001:db8::1]:8443"},
		"http://192.0.2.1":             {Exact: "http://192.0.2.1"},
		`https://.*\.example\.com`:     {Regex: `https://.*\.example\.com`},
		"https://app[0-9].example.com": {Regex: "https://app[0-9].example.com"},
	} {
		if got, err := ParseCORSOrigin(in); err != nil || got != want {
			t.Errorf("ParseCORSOrigin(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", " ", "*.example.com", "https://(a"} {
		if got, err := ParseCORSOrigin(bad); err == nil {
			t.Errorf("ParseCORSOrigin(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestGatewayCORSOrigin(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CORSOrigin
	}{
		{"*", CORSOrigin{Any: true}},
		{"https://www.foo.com", CORSOrigin{Exact: "https://www.foo.com"}},
		{"https://*.bar.com", CORSOrigin{Regex: `https://.*\.bar\.com`}},
	} {
		if got := GatewayCORSOrigin(tc.in); got != tc.want {
			t.Errorf("GatewayCORSOrigin(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	re := regexp.MustCompile(`^(?:` + GatewayCORSOrigin("https://*.bar.com").Regex + `)$`)
	for origin, want := range map[string]bool{"https://www.bar.com": true, "https://x.www.bar.com": true, "https://bar.com": false, "http://www.bar.com": false, "https://www.barxcom": false} {
		if re.MatchString(origin) != want {
			t.Errorf("https://*.bar.com matches %q: %v, want %v", origin, !want, want)
		}
	}
}

// The host's IP rules apply to its routes; a route's own rules replace them; both
// listeners' hosts carry them.
func TestHTTPProxyIPFilter(t *testing.T) {
	cert := testutil.SelfSigned("ip.example.com")
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: ip.example.com
    tls: {secretName: cert}
    ipAllowPolicy: [{source: Peer, cidr: 10.0.0.0/8}, {source: Remote, cidr: "2001:db8::7"}]
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /admin}]
    ipDenyPolicy: [{source: Remote, cidr: 192.168.0.0/16}]
    services: [{name: web, port: 80}]
`), tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM), svc("default", "web", ":80"))
	wantHost := &IPFilter{Allow: true, Rules: []IPRule{
		{Prefix: netip.MustParsePrefix("10.0.0.0/8")},
		{Remote: true, Prefix: netip.MustParsePrefix("2001:db8::7/128")},
	}}
	wantRoute := &IPFilter{Rules: []IPRule{{Remote: true, Prefix: netip.MustParsePrefix("192.168.0.0/16")}}}
	if len(g.HTTPS) != 1 || len(g.HTTP) != 1 {
		t.Fatalf("hosts: %d HTTPS, %d HTTP; want 1 each", len(g.HTTPS), len(g.HTTP))
	}
	for _, vh := range []*VirtualHost{&g.HTTPS[0].VirtualHost, g.HTTP[0]} {
		if diff := cmp.Diff(wantHost, vh.IPFilter, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("%s: host filter (-want +got):\n%s", vh.Name, diff)
		}
	}
	for _, r := range g.HTTPS[0].Routes {
		var want *IPFilter
		if r.Path.Value == "/admin" {
			want = wantRoute
		}
		if diff := cmp.Diff(want, r.IPFilter, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("route %s: filter (-want +got):\n%s", r.Path.Value, diff)
		}
	}
}

func TestHTTPProxyIPFilterInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, vh, route string
		reason, msg     string
	}{
		{name: "bad cidr", vh: `, ipDenyPolicy: [{source: Peer, cidr: 300.1.1.1}]`, reason: "CIDRInvalid",
			msg: `spec.virtualhost.ipDenyPolicy[0].cidr "300.1.1.1" is not an IP address or CIDR block: write one such as 10.0.0.0/8`},
		{name: "bad source", route: "\n    ipAllowPolicy: [{source: Proxy, cidr: 10.0.0.0/8}]", reason: "SourceInvalid",
			msg: `spec.routes[0].ipAllowPolicy[0].source "Proxy" must be Peer`},
		{name: "allow and deny", vh: `, ipAllowPolicy: [{source: Peer, cidr: 10.0.0.0/8}], ipDenyPolicy: [{source: Peer, cidr: 10.1.0.0/16}]`, reason: "PolicyConflict",
			msg: "spec.virtualhost: ipAllowPolicy and ipDenyPolicy are exclusive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: ip.example.com`+tc.vh+`}
  routes:
  - services: [{name: web, port: 80}]`+tc.route+`
`), svc("default", "web", ":80"))
			wantInvalid(t, g, "default", "root", problemIPFilter, tc.reason, tc.msg)
		})
	}
}

func TestHTTPProxyCORS(t *testing.T) {
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: cors.example.com
    corsPolicy:
      allowOrigin: ["https://app.example.com", 'https://.*\.example\.org', "*"]
      allowMethods: [GET, POST]
      allowHeaders: [authorization]
      exposeHeaders: [x-total]
      allowCredentials: true
      allowPrivateNetwork: true
      maxAge: 10m
  routes: [{services: [{name: web, port: 80}]}]
`), svc("default", "web", ":80"))
	want := &CORSPolicy{
		AllowOrigins:  []CORSOrigin{{Exact: "https://app.example.com"}, {Regex: `https://.*\.example\.org`}, {Any: true}},
		AllowMethods:  []string{"GET", "POST"},
		AllowHeaders:  []string{"authorization"},
		ExposeHeaders: []string{"x-total"}, AllowCredentials: true, AllowPrivateNetwork: true, MaxAge: "600",
	}
	if len(g.HTTP) != 1 {
		t.Fatalf("%d hosts, want 1", len(g.HTTP))
	}
	if diff := cmp.Diff(want, g.HTTP[0].CORS); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
}

func TestHTTPProxyCORSInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, policy, reason, msg string
	}{
		{name: "glob origin", policy: `{allowOrigin: ["*.example.com"], allowMethods: [GET]}`, reason: "AllowOriginInvalid",
			msg: `allowOrigin[0] "*.example.com" is neither "*", an origin (scheme://host[:port]) nor a regular expression`},
		{name: "bad regex", policy: `{allowOrigin: ["https://(a"], allowMethods: [GET]}`, reason: "AllowOriginInvalid", msg: "missing closing )"},
		{name: "no methods", policy: `{allowOrigin: ["*"]}`, reason: "AllowMethodsMissing", msg: "spec.virtualhost.corsPolicy.allowMethods is required"},
		{name: "negative maxAge", policy: `{allowOrigin: ["*"], allowMethods: [GET], maxAge: "-1s"}`, reason: "MaxAgeInvalid", msg: `spec.virtualhost.corsPolicy.maxAge "-1s": negative`},
		{name: "bad header", policy: `{allowOrigin: ["*"], allowMethods: [GET], allowHeaders: ["a b"]}`, reason: "HeaderValueInvalid", msg: `allowHeaders[0] "a b" is not a method or header name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: cors.example.com, corsPolicy: `+tc.policy+`}
  routes: [{services: [{name: web, port: 80}]}]
`), svc("default", "web", ":80"))
			wantInvalid(t, g, "default", "root", problemCORS, tc.reason, tc.msg)
		})
	}
}
