package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
)

// HTTPProxy ipAllowPolicy / ipDenyPolicy and corsPolicy through the embedded proxy,
// with real clients and backends.

const ipProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ip, namespace: default}
spec:
  virtualhost:
    fqdn: ip.example.com
    ipAllowPolicy: [{source: Peer, cidr: 127.0.0.1}]
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /remote}]
    ipAllowPolicy: [{source: Remote, cidr: 203.0.113.0/24}]
    services: [{name: web, port: 80}]
  - conditions: [{prefix: /deny}]
    ipDenyPolicy: [{source: Peer, cidr: 127.0.0.0/8}]
    services: [{name: web, port: 80}]
`

// The host's rule lets the loopback client in; a route's rules replace the host's;
// Remote rules see the client X-Forwarded-For names after the trusted hop, never an
// address the client put in front of it.
func TestIPAllowAndDenyPolicies(t *testing.T) {
	e := startWith(t, map[string]string{"web.yaml": backends(t, "web"), "ip.yaml": ipProxy}, app.RunOptions{NumTrustedHops: 1})
	e.waitFor("ip.example.com", "/", "web", http.StatusOK)
	denied := func(r result) bool {
		return r.status == http.StatusForbidden && r.body == "RBAC: access denied" && r.service() == ""
	}
	for _, tc := range []struct {
		name, path string
		xff        []string
		served     bool
	}{
		{"host rule lets the peer in", "/", nil, true},
		{"route rule replaces the host's: the peer is not the client", "/remote", nil, false},
		{"client after one trusted hop", "/remote/x", []string{"X-Forwarded-For", "203.0.113.5"}, true},
		{"other client", "/remote", []string{"X-Forwarded-For", "198.51.100.1"}, false},
		{"a spoofed address before the trusted hop's", "/remote", []string{"X-Forwarded-For", "203.0.113.5, 198.51.100.1"}, false},
		{"the trusted hop's entry in a second header line", "/remote", []string{"X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "203.0.113.9"}, true},
		{"not an address", "/remote", []string{"X-Forwarded-For", "unknown"}, false},
		{"deny rule on the peer", "/deny", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.get("ip.example.com", tc.path, tc.xff...)
			switch {
			case tc.served && (r.status != http.StatusOK || r.service() != "web"):
				t.Errorf("got %d %q from %q, want web's 200", r.status, r.body, r.service())
			case !tc.served && !denied(r):
				t.Errorf("got %d %q from %q, want 403 %q from the proxy", r.status, r.body, r.service(), "RBAC: access denied")
			}
		})
	}

	// Editing only the policy changes what is served.
	e.write("ip.yaml", strings.Replace(ipProxy, "ipAllowPolicy: [{source: Peer, cidr: 127.0.0.1}]", "ipDenyPolicy: [{source: Peer, cidr: 127.0.0.1/32}]", 1))
	e.eventually(10*time.Second, "the edited host policy to refuse the loopback client", func() bool {
		return denied(e.get("ip.example.com", "/"))
	})
	if r := e.get("ip.example.com", "/remote", "X-Forwarded-For", "203.0.113.5"); r.service() != "web" {
		t.Errorf("route with its own rules: got %d from %q, want web", r.status, r.service())
	}
}

// Over IPv6 the peer is ::1; IPv4 rules do not match it.
func TestIPPoliciesIPv6(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	l.Close()
	e := startWith(t, map[string]string{"web.yaml": backends(t, "web"), "ip.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ip6, namespace: default}
spec:
  virtualhost:
    fqdn: ip6.example.com
    ipAllowPolicy: [{source: Peer, cidr: "::1"}]
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /v4only}]
    ipAllowPolicy: [{source: Peer, cidr: 127.0.0.0/8}]
    services: [{name: web, port: 80}]
  - conditions: [{prefix: /deny}]
    ipDenyPolicy: [{source: Remote, cidr: "::/0"}]
    services: [{name: web, port: 80}]
`}, app.RunOptions{HTTPAddr: "[::1]:0"})
	e.waitFor("ip6.example.com", "/", "web", http.StatusOK)
	for path, want := range map[string]int{"/v4only": http.StatusForbidden, "/deny": http.StatusForbidden, "/ok": http.StatusOK} {
		if r := e.get("ip6.example.com", path); r.status != want {
			t.Errorf("%s: got %d %q, want %d", path, r.status, r.body, want)
		}
	}
}

const corsProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: cors, namespace: default}
spec:
  virtualhost:
    fqdn: cors.example.com
    corsPolicy:
      allowOrigin: ["https://app.example.com", 'https://.*\.example\.org']
      allowMethods: [GET, PUT]
      allowHeaders: [authorization, x-a]
      exposeHeaders: [x-total]
      allowCredentials: true
      maxAge: 10m
  routes:
  - services: [{name: web, port: 80}]
    responseHeadersPolicy: {set: [{name: x-route, value: "yes"}]}
`

// A preflight from an allowed origin is answered by the proxy; the responses to
// actual requests from allowed origins carry the CORS headers; other origins get
// none, and their preflights reach the backend as Envoy forwards them.
func TestCORSPolicy(t *testing.T) {
	e := start(t, map[string]string{"web.yaml": backends(t, "web"), "cors.yaml": corsProxy})
	e.waitFor("cors.example.com", "/", "web", http.StatusOK)
	send := func(method, path string, header ...string) result {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+e.httpAddr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "cors.example.com"
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Add(header[i], header[i+1])
		}
		return e.do(req, e.client)
	}
	wantHeaders := func(t *testing.T, r result, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got := r.header.Values(k); v == "" && len(got) > 0 || v != "" && (len(got) != 1 || got[0] != v) {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
	}

	pre := send(http.MethodOptions, "/api", "Origin", "https://app.example.com", "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "authorization")
	if pre.status != http.StatusOK || pre.service() != "" || pre.body != "" {
		t.Errorf("preflight: %d %q from %q, want an empty 200 from the proxy", pre.status, pre.body, pre.service())
	}
	// The proxy's own answer, as Envoy's CORS filter encodes it: without the
	// route's response headers.
	wantHeaders(t, pre, map[string]string{
		"X-Route":                     "",
		"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Methods": "GET,PUT",
		"Access-Control-Allow-Headers": "authorization,x-a", "Access-Control-Max-Age": "600",
		"Access-Control-Allow-Credentials": "true", "Access-Control-Expose-Headers": "x-total",
	})

	actual := send(http.MethodGet, "/api", "Origin", "https://shop.example.org")
	if actual.service() != "web" {
		t.Errorf("actual request: %d from %q, want web", actual.status, actual.service())
	}
	wantHeaders(t, actual, map[string]string{
		"Access-Control-Allow-Origin": "https://shop.example.org", "Access-Control-Allow-Credentials": "true",
		"Access-Control-Expose-Headers": "x-total", "Access-Control-Allow-Methods": "", "X-Route": "yes",
	})

	none := map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Credentials": "", "Access-Control-Expose-Headers": ""}
	other := send(http.MethodGet, "/api", "Origin", "https://evil.example.com")
	if other.service() != "web" {
		t.Errorf("request from another origin: %d from %q, want web", other.status, other.service())
	}
	wantHeaders(t, other, none)
	otherPre := send(http.MethodOptions, "/api", "Origin", "https://shop.example.org.evil.com", "Access-Control-Request-Method", "PUT")
	if otherPre.service() != "web" || otherPre.echo.Method != http.MethodOptions {
		t.Errorf("preflight from another origin: %d from %q, want it forwarded to web", otherPre.status, otherPre.service())
	}
	wantHeaders(t, otherPre, none)

	// Editing only the policy changes what is served.
	e.write("cors.yaml", strings.Replace(corsProxy, `"https://app.example.com", `, `"https://new.example.com", `, 1))
	e.eventually(10*time.Second, "the edited policy to allow https://new.example.com", func() bool {
		r := send(http.MethodGet, "/", "Origin", "https://new.example.com")
		return r.header.Get("Access-Control-Allow-Origin") == "https://new.example.com"
	})
	wantHeaders(t, send(http.MethodGet, "/", "Origin", "https://app.example.com"), none)
}

// `portico check` shows what is wrong with IP rules and CORS policies, and how to fix it.
func TestCheckShowsIPAndCORSProblems(t *testing.T) {
	bin := portico(t)
	dir := t.TempDir()
	manifests := `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: badip, namespace: default}
spec:
  virtualhost: {fqdn: badip.example.com, ipAllowPolicy: [{source: Peer, cidr: 10.0.0.0/33}]}
  routes: [{services: [{name: web, port: 80}]}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: badcors, namespace: default}
spec:
  virtualhost: {fqdn: badcors.example.com, corsPolicy: {allowOrigin: ["*.example.com"], allowMethods: [GET]}}
  routes: [{services: [{name: web, port: 80}]}]
`
	if err := os.WriteFile(filepath.Join(dir, "proxies.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBinary(t, bin, "check", dir, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	want := map[string]string{
		"badip":   `spec.virtualhost.ipAllowPolicy[0].cidr "10.0.0.0/33" is not an IP address or CIDR block: write one such as 10.0.0.0/8`,
		"badcors": `spec.virtualhost.corsPolicy.allowOrigin[0] "*.example.com" is neither "*", an origin (scheme://host[:port]) nor a regular expression`,
	}
	for _, e := range entries {
		name, _ := e["name"].(string)
		desc, _ := e["description"].(string)
		if w, ok := want[name]; ok {
			if e["status"] != "invalid" || !strings.Contains(desc, w) {
				t.Errorf("%s: %s %q, want invalid saying %q", name, e["status"], desc, w)
			}
			delete(want, name)
		}
	}
	if len(want) > 0 {
		t.Errorf("not reported: %v", want)
	}
}
