package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
)

// End-to-end tests of contour.heptio.com/v1beta1 IngressRoute (seeds 003 and 002): real
// manifests, the run pipeline, the embedded proxy and real requests to real backends.
// Helpers shared by these tests are in ingressroute_helpers_test.go.

// TestIngressRouteDelegationChainAcrossNamespaces: infra owns www.example.com and delegates
// "/" to web/site, which delegates "/blog" to blog/blog. Every prefix reaches its team's
// Service, and a Service name resolves in the namespace of the IngressRoute that names it:
// web and blog both have a Service "app" with different backends.
func TestIngressRouteDelegationChainAcrossNamespaces(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "infra/app", "web/app", "blog/app"),
		"infra.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: www, namespace: infra}
spec:
  virtualhost: {fqdn: www.example.com, aliases: [example.com]}
  routes:
  - match: /
    delegate: {name: site, namespace: web}
`,
		"web.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: site, namespace: web}
spec:
  routes:
  - match: /
    services: [{name: app, port: 80}]
  - match: /blog
    delegate: {name: blog, namespace: blog}
`,
		"blog.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: blog, namespace: blog}
spec:
  routes:
  - match: /blog
    services: [{name: app, port: 80}]
`,
	})
	for _, host := range []string{"www.example.com", "example.com", "WWW.Example.COM"} {
		for path, wantNS := range map[string]string{
			"/":               "web",
			"/about":          "web",
			"/bl":             "web",
			"/blog":           "blog",
			"/blog/":          "blog",
			"/blog/2024/post": "blog",
			"/blogroll":       "blog", // IngressRoute prefixes are string prefixes, as in Contour
			"/Blog":           "web",  // and case sensitive
		} {
			r := e.get(host, path)
			if r.status != 200 || r.service() != "app" || r.echo.Namespace != wantNS {
				t.Errorf("GET %s%s: %d from %s/%s, want 200 from %s/app", host, path, r.status, r.echo.Namespace, r.service(), wantNS)
			}
		}
	}
	// Nothing else is served: the root's Service "app" in infra is never reached, and other
	// hosts are unknown.
	if r := e.get("other.example.com", "/"); r.status != 404 {
		t.Errorf("unknown host: %d from %s/%s, want 404", r.status, r.echo.Namespace, r.service())
	}
	st := checkIngressRoutes(t, e.dir, dag.Options{})
	for _, name := range []string{"infra/www", "web/site", "blog/blog"} {
		if st[name].Status != dag.StatusValid {
			t.Errorf("%s: %s (%s), want valid", name, st[name].Status, st[name].Description)
		}
	}
	if d := st["blog/blog"].Description; !strings.Contains(d, `"/blog" delegated by IngressRoute web/site`) {
		t.Errorf("blog/blog's status does not say who delegates to it: %q", d)
	}
}

// delegationProblems is a root whose delegations go wrong in every way seed 003 names.
const delegationProblems = `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: problems.example.com}
  routes:
  - {match: /, delegate: {name: site, namespace: web}}
  - {match: /missing, delegate: {name: nothere, namespace: web}}
  - {match: /cycle, delegate: {name: a, namespace: loop}}
  - {match: /outside, delegate: {name: outside, namespace: web}}
  - {match: /rooted, delegate: {name: other, namespace: web}}
  - {match: /sneaky, delegate: {name: sneaky, namespace: sneak}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: sneaky, namespace: sneak}
spec:
  routes:
  - {match: /sneaky, services: [{name: web/site, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: site, namespace: web}
spec:
  routes:
  - {match: /, services: [{name: site, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: orphan, namespace: web}
spec:
  routes:
  - {match: /, services: [{name: orphan, port: 80}]}
  - {match: /orphan, services: [{name: orphan, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: a, namespace: loop}
spec:
  routes:
  - {match: /cycle, delegate: {name: b}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: b, namespace: loop}
spec:
  routes:
  - {match: /cycle/b, services: [{name: loop, port: 80}]}
  - {match: /cycle, delegate: {name: a}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: outside, namespace: web}
spec:
  routes:
  - {match: /elsewhere, services: [{name: site, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: other, namespace: web}
spec:
  virtualhost: {fqdn: other.example.com}
  routes:
  - {match: /, services: [{name: site, port: 80}]}
`

// TestIngressRouteOrphansCyclesAndRefusedDelegations: an orphaned vertex has no effect; a
// delegation to a missing object, into a cycle, to an object with routes outside the
// delegated prefix, or to a root answers 503 on that prefix (never falling through to
// "/"), and the check reports each object as valid, invalid or orphaned, saying why.
func TestIngressRouteOrphansCyclesAndRefusedDelegations(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web/site", "web/orphan", "loop/loop"),
		"routes.yaml":   delegationProblems,
	})
	for _, tc := range []struct {
		path    string
		status  int
		service string
	}{
		{"/", 200, "site"},
		{"/orphan", 200, "site"}, // the orphan's own route is not served
		{"/missing", 503, ""},
		{"/missing/deeper", 503, ""},
		{"/cycle", 503, ""},   // the cycle's zone: what its routes do not serve
		{"/cycle/b", 503, ""}, // loop/b, the newest object of the cycle, is invalid
		{"/outside", 503, ""},
		{"/elsewhere", 200, "site"}, // web/outside's route is not served: "/" answers it
		{"/rooted", 503, ""},
		{"/sneaky", 503, ""}, // a team cannot name another namespace's Service
	} {
		if r := e.get("problems.example.com", tc.path); r.status != tc.status || r.service() != tc.service {
			t.Errorf("GET problems.example.com%s: %d from %q, want %d from %q", tc.path, r.status, r.service(), tc.status, tc.service)
		}
	}
	// A root delegated to keeps serving its own host.
	if r := e.get("other.example.com", "/x"); r.status != 200 || r.service() != "site" {
		t.Errorf("other.example.com: %d from %q", r.status, r.service())
	}

	// What `portico check` reports (app.Check is its engine; TestCheckCommand covers the
	// command line and its JSON).
	st := checkIngressRoutes(t, e.dir, dag.Options{})
	for name, want := range map[string]struct {
		status dag.StatusValue
		says   string
	}{
		"infra/root": {dag.StatusValid, `route "/missing": not delegated to IngressRoute web/nothere: it does not exist`},
		"web/site":   {dag.StatusValid, `"/" delegated by IngressRoute infra/root`},
		"web/orphan": {dag.StatusOrphaned, "not part of a delegation chain from a root"},
		// b's delegation back to a closes a cycle; b comes after a in the same file, so
		// it is the newest object on the cycle: b is invalid and says why.
		"loop/a":       {dag.StatusValid, `"/cycle" delegated by IngressRoute infra/root`},
		"loop/b":       {dag.StatusInvalid, "its delegation closes a cycle: IngressRoute loop/b -> IngressRoute loop/a -> IngressRoute loop/b"},
		"web/outside":  {dag.StatusInvalid, `its route "/elsewhere" is not under "/outside"`},
		"web/other":    {dag.StatusValid, "only IngressRoutes without spec.virtualhost can be delegated to"},
		"sneak/sneaky": {dag.StatusInvalid, `name "web/site" is not a Service name`},
	} {
		if s := st[name]; s.Status != want.status || !strings.Contains(s.Description, want.says) {
			t.Errorf("%s: %s %q, want %s saying %q", name, s.Status, s.Description, want.status, want.says)
		}
	}
	if len(st) != 8 {
		t.Errorf("check reported %d IngressRoutes, want 8: %v", len(st), st)
	}
}

// TestIngressRouteBlueGreenSwitch is seed 003's blue-green deployment: the root delegates
// "/" to blue while green waits, orphaned; rewriting the root to delegate to green moves
// the traffic, and no request fails while it moves.
func TestIngressRouteBlueGreenSwitch(t *testing.T) {
	t.Parallel()
	root := `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: app, namespace: infra}
spec:
  virtualhost: {fqdn: bg.example.com}
  routes:
  - match: /
    delegate: {name: COLOR, namespace: prod}
`
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "prod/blue", "prod/green"),
		"root.yaml":     strings.ReplaceAll(root, "COLOR", "blue"),
		"vertices.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: blue, namespace: prod}
spec:
  routes: [{match: /, services: [{name: blue, port: 80}]}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: green, namespace: prod}
spec:
  routes: [{match: /, services: [{name: green, port: 80}]}]
`,
	})
	if r := e.get("bg.example.com", "/"); r.service() != "blue" {
		t.Fatalf("before the switch: %d from %q, want blue", r.status, r.service())
	}
	st := checkIngressRoutes(t, e.dir, dag.Options{})
	if st["prod/blue"].Status != dag.StatusValid || st["prod/green"].Status != dag.StatusOrphaned {
		t.Errorf("before the switch: blue %s, green %s; want valid and orphaned", st["prod/blue"].Status, st["prod/green"].Status)
	}

	// A connection opened before the switch, kept alive across it.
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	kept := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	viaKept := func() result {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+"/", nil)
		req.Host = "bg.example.com"
		return e.do(req, kept)
	}
	if r := viaKept(); r.service() != "blue" {
		t.Fatalf("before the switch, kept-alive connection: %d from %q", r.status, r.service())
	}

	load := startLoad(e, "bg.example.com", "/", map[string]bool{"blue": true, "green": true})
	time.Sleep(100 * time.Millisecond) // traffic before the switch, too
	e.write("root.yaml", strings.ReplaceAll(root, "COLOR", "green"))
	took := e.waitFor("bg.example.com", "/", "green", 200)
	t.Logf("traffic switched to green %s after the root was rewritten", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the switch took %s, want at most 2s", took)
	}
	time.Sleep(100 * time.Millisecond) // and after it
	sent, failures := load.stop()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during the switch, first: %s", len(failures), sent, failures[0])
	}
	if sent < 20 {
		t.Errorf("only %d requests were sent during the switch", sent)
	}
	// Once switched, blue gets nothing, on new connections or on old ones.
	if r := viaKept(); r.service() != "green" {
		t.Errorf("after the switch, the connection opened before it: %d from %q, want green", r.status, r.service())
	}
	if got := e.tally("bg.example.com", "/", 50); got["green"] != 50 {
		t.Errorf("after the switch: %v, want all 50 from green", got)
	}
	st = checkIngressRoutes(t, e.dir, dag.Options{})
	if st["prod/blue"].Status != dag.StatusOrphaned || st["prod/green"].Status != dag.StatusValid {
		t.Errorf("after the switch: blue %s, green %s; want orphaned and valid", st["prod/blue"].Status, st["prod/green"].Status)
	}
}

// TestIngressRouteCanaryWeights is seed 003's canary: weights split a route's traffic
// between services; a weight of 0 gets nothing; no weights, or only zeros, split evenly.
func TestIngressRouteCanaryWeights(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "shop/stable", "shop/canary"),
		"route.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: shop, namespace: shop}
spec:
  virtualhost: {fqdn: canary.example.com}
  routes:
  - match: /weighted
    services:
    - {name: stable, port: 80, weight: 90}
    - {name: canary, port: 80, weight: 10}
  - match: /zero
    services:
    - {name: stable, port: 80, weight: 1}
    - {name: canary, port: 80, weight: 0}
  - match: /unset
    services:
    - {name: stable, port: 80, weight: 5}
    - {name: canary, port: 80}
  - match: /even
    services:
    - {name: stable, port: 80}
    - {name: canary, port: 80}
  - match: /all-zero
    services:
    - {name: stable, port: 80, weight: 0}
    - {name: canary, port: 80, weight: 0}
`,
	})
	// 10% of 1000 requests: the standard deviation is under 1%, so ±4% is more than 4 of
	// them; 50% of 400: 2.5%, so ±10%.
	for _, tc := range []struct {
		path           string
		n              int
		canary, within float64
	}{
		{"/weighted", 1000, 0.10, 0.04},
		{"/even", 400, 0.50, 0.10},
		{"/all-zero", 400, 0.50, 0.10},
		{"/zero", 100, 0, 0},
		{"/unset", 100, 0, 0},
	} {
		got := e.tally("canary.example.com", tc.path, tc.n)
		share := float64(got["canary"]) / float64(tc.n)
		if got["stable"]+got["canary"] != tc.n || share < tc.canary-tc.within || share > tc.canary+tc.within {
			t.Errorf("%s: %v over %d requests: canary got %.1f%%, want %.0f%% ± %.0f%%", tc.path, got, tc.n, 100*share, 100*tc.canary, 100*tc.within)
		}
	}
}

// TestIngressRouteTLS: a root with a certificate serves its routes over HTTPS and
// redirects plain HTTP there (301, same host, path and query), except routes with
// permitInsecure; minimumProtocolVersion is enforced, and defaults to TLS 1.1.
func TestIngressRouteTLS(t *testing.T) {
	t.Parallel()
	secure, modern := testutil.SelfSigned("secure.example.com"), testutil.SelfSigned("modern.example.com")
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "infra/app", "infra/acme", "team/app"),
		"secrets.yaml":  tlsSecretManifestIn("infra", "secure-tls", secure) + "---\n" + tlsSecretManifestIn("infra", "modern-tls", modern),
		"roots.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: secure, namespace: infra}
spec:
  virtualhost:
    fqdn: secure.example.com
    tls: {secretName: secure-tls}
  routes:
  - {match: /, services: [{name: app, port: 80}]}
  - {match: /.well-known/acme-challenge, permitInsecure: true, services: [{name: acme, port: 80}]}
  - {match: /team, delegate: {name: team, namespace: team}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: team, namespace: team}
spec:
  routes:
  - {match: /team, services: [{name: app, port: 80}]}
  - {match: /team/public, permitInsecure: true, services: [{name: app, port: 80}]}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: modern, namespace: infra}
spec:
  virtualhost:
    fqdn: modern.example.com
    tls: {secretName: modern-tls, minimumProtocolVersion: "1.3"}
  routes:
  - {match: /, services: [{name: app, port: 80}]}
`,
	})
	if r := e.getTLS("secure.example.com", "/a/b?c=d", false); r.status != 200 || r.service() != "app" || r.tlsCert != "secure.example.com" || r.echo.Path != "/a/b" {
		t.Errorf("https://secure.example.com/a/b: %d from %q at %q, certificate %q", r.status, r.service(), r.echo.Path, r.tlsCert)
	}
	if r := e.getTLS("secure.example.com", "/", true); r.status != 200 || r.service() != "app" || r.proto != "HTTP/2.0" {
		t.Errorf("https://secure.example.com/ over HTTP/2: %d from %q, %s", r.status, r.service(), r.proto)
	}
	// Plain HTTP is redirected. HTTPSAddr is 127.0.0.1:0 here: the Runner cannot know the
	// port the HTTPS listener will get, so the redirect names none (443). With a fixed
	// HTTPS port it is in the Location: see TestIngressRouteHTTPSRedirectToRunModePort.
	for path, want := range map[string]string{
		"/":                     "https://secure.example.com/",
		"/some/path?x=1&y=%2F2": "https://secure.example.com/some/path?x=1&y=%2F2",
		"/a%20b/c?":             "https://secure.example.com/a%20b/c",
		"/.well-known/other":    "https://secure.example.com/.well-known/other",
	} {
		r := e.get("secure.example.com", path)
		if r.status != http.StatusMovedPermanently || r.header.Get("Location") != want || r.service() != "" {
			t.Errorf("http://secure.example.com%s: %d Location %q (from %q), want 301 to %s", path, r.status, r.header.Get("Location"), r.service(), want)
		}
	}
	// permitInsecure: served on both listeners.
	if r := e.get("secure.example.com", "/.well-known/acme-challenge/token"); r.status != 200 || r.service() != "acme" {
		t.Errorf("permitInsecure route over HTTP: %d from %q, want 200 from acme", r.status, r.service())
	}
	if r := e.getTLS("secure.example.com", "/.well-known/acme-challenge/token", false); r.status != 200 || r.service() != "acme" {
		t.Errorf("permitInsecure route over HTTPS: %d from %q, want 200 from acme", r.status, r.service())
	}
	// In a delegated vertex, too; its other routes are redirected like the root's.
	if r := e.get("secure.example.com", "/team/public/x"); r.status != 200 || r.echo.Namespace != "team" {
		t.Errorf("permitInsecure route of a vertex over HTTP: %d from %s/%s, want 200 from team/app", r.status, r.echo.Namespace, r.service())
	}
	if r := e.get("secure.example.com", "/team/private"); r.status != http.StatusMovedPermanently || r.header.Get("Location") != "https://secure.example.com/team/private" {
		t.Errorf("route of a vertex over HTTP: %d to %q, want 301 to https://secure.example.com/team/private", r.status, r.header.Get("Location"))
	}
	if r := e.getTLS("secure.example.com", "/team/private", false); r.status != 200 || r.echo.Namespace != "team" {
		t.Errorf("route of a vertex over HTTPS: %d from %s/%s", r.status, r.echo.Namespace, r.service())
	}
	// minimumProtocolVersion "1.3" refuses TLS 1.2.
	if _, err := handshake(e.httpsAddr(), "modern.example.com", tls.VersionTLS12, tls.VersionTLS12, nil); err == nil {
		t.Error("modern.example.com (minimumProtocolVersion 1.3) accepted a TLS 1.2 client")
	}
	if v, err := handshake(e.httpsAddr(), "modern.example.com", tls.VersionTLS13, tls.VersionTLS13, nil); err != nil || v != tls.VersionTLS13 {
		t.Errorf("modern.example.com with TLS 1.3: version %x, %v", v, err)
	}
	if r := e.getTLS("modern.example.com", "/", false); r.status != 200 || r.service() != "app" {
		t.Errorf("https://modern.example.com/: %d from %q", r.status, r.service())
	}
	// The default minimum is TLS 1.1 (seed 003): a TLS 1.1 client is served, TLS 1.0 is not.
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}
	if v, err := handshake(e.httpsAddr(), "secure.example.com", tls.VersionTLS11, tls.VersionTLS11, cbc); err != nil || v != tls.VersionTLS11 {
		t.Errorf("secure.example.com (default minimum) with TLS 1.1: version %x, %v", v, err)
	}
	if _, err := handshake(e.httpsAddr(), "secure.example.com", tls.VersionTLS10, tls.VersionTLS10, cbc); err == nil {
		t.Error("secure.example.com accepted a TLS 1.0 client; the default minimum is 1.1")
	}
	if _, err := handshake(e.httpsAddr(), "modern.example.com", tls.VersionTLS11, tls.VersionTLS11, cbc); err == nil {
		t.Error("modern.example.com accepted a TLS 1.1 client")
	}
}

// TestIngressRouteHTTPSRedirectToRunModePort: in run mode nothing maps 443 to the HTTPS
// listener, so the redirect names its port, and following it works.
func TestIngressRouteHTTPSRedirectToRunModePort(t *testing.T) {
	t.Parallel()
	cert := testutil.SelfSigned("secure.example.com")
	httpsAddr := testutil.FreeAddr(t)
	_, port, _ := net.SplitHostPort(httpsAddr)
	e := startWith(t, map[string]string{
		"backends.yaml": backends(t, "app"),
		"root.yaml": tlsSecretManifest("tls", cert) + `---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: secure}
spec:
  virtualhost: {fqdn: secure.example.com, tls: {secretName: tls}}
  routes: [{match: /, services: [{name: app, port: 80}]}]
`,
	}, app.RunOptions{HTTPSAddr: httpsAddr})
	r := e.get("secure.example.com", "/p?q=1")
	want := "https://secure.example.com:" + port + "/p?q=1"
	if r.status != http.StatusMovedPermanently || r.header.Get("Location") != want {
		t.Fatalf("http://secure.example.com/p?q=1: %d Location %q, want 301 to %s", r.status, r.header.Get("Location"), want)
	}
	// Follow it, resolving secure.example.com to the loopback address.
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // self-signed test certificate
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, p, _ := net.SplitHostPort(addr)
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", p))
		},
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, r.header.Get("Location"), nil)
	if r := e.do(req, &http.Client{Transport: tr, Timeout: 5 * time.Second}); r.status != 200 || r.service() != "app" || r.echo.Query != "q=1" {
		t.Errorf("following the redirect: %d from %q, query %q", r.status, r.service(), r.echo.Query)
	}
}

// TestIngressRouteTLSCertificateDelegation: a root may use a Secret of another namespace
// only when a TLSCertificateDelegation there lists the root's namespace, or "*". Without
// it the root is invalid and its host is not served at all, not even over plain HTTP.
func TestIngressRouteTLSCertificateDelegation(t *testing.T) {
	t.Parallel()
	wildcard := testutil.SelfSigned("*.example.com")
	delegation := `
apiVersion: contour.heptio.com/v1beta1
kind: TLSCertificateDelegation
metadata: {name: wildcard, namespace: certs}
spec:
  delegations:
  - secretName: wildcard
    targetNamespaces: TARGETS
`
	roots := ""
	for _, ns := range []string{"a", "b"} {
		roots += fmt.Sprintf(`---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: site, namespace: %[1]s}
spec:
  virtualhost:
    fqdn: %[1]s.example.com
    tls: {secretName: certs/wildcard}
  routes: [{match: /, services: [{name: app, port: 80}]}]
`, ns)
	}
	e := start(t, map[string]string{
		"backends.yaml":   backends(t, "a/app", "b/app"),
		"secret.yaml":     tlsSecretManifestIn("certs", "wildcard", wildcard),
		"roots.yaml":      roots,
		"delegation.yaml": strings.ReplaceAll(delegation, "TARGETS", "[a]"),
	})
	served := func(host string) bool {
		r, err := e.getTLSE(host, "/")
		return err == nil && r.status == 200 && r.service() == "app" && r.echo.Namespace == host[:1] && r.tlsCert == "*.example.com"
	}
	if !served("a.example.com") {
		t.Error("a.example.com is not served over HTTPS with the delegated certificate")
	}
	if r := e.get("a.example.com", "/"); r.status != http.StatusMovedPermanently {
		t.Errorf("http://a.example.com/: %d, want 301", r.status)
	}
	if served("b.example.com") {
		t.Error("b.example.com is served with a certificate not delegated to namespace b")
	}
	if r := e.get("b.example.com", "/"); r.status != 404 {
		t.Errorf("http://b.example.com/ with an undelegated certificate: %d from %q, want 404", r.status, r.service())
	}
	st := checkIngressRoutes(t, e.dir, dag.Options{})
	if s := st["b/site"]; s.Status != dag.StatusInvalid || !strings.Contains(s.Description, "TLSCertificateDelegation") {
		t.Errorf("b/site: %s %q, want invalid, naming TLSCertificateDelegation", s.Status, s.Description)
	}
	if s := st["a/site"]; s.Status != dag.StatusValid {
		t.Errorf("a/site: %s %q, want valid", s.Status, s.Description)
	}

	e.write("delegation.yaml", strings.ReplaceAll(delegation, "TARGETS", `["*"]`))
	e.eventually(5*time.Second, "b.example.com to be served once the certificate is delegated to *", func() bool { return served("b.example.com") })
	if !served("a.example.com") {
		t.Error(`a.example.com is not served with the certificate delegated to "*"`)
	}

	e.remove("delegation.yaml")
	e.eventually(5*time.Second, "a.example.com to stop once the delegation is gone", func() bool {
		return !served("a.example.com") && e.get("a.example.com", "/").status == 404
	})
}

// TestIngressRoutePrefixRewrite: prefixRewrite replaces the matched prefix, and a rewrite
// to "/" never produces "//".
func TestIngressRoutePrefixRewrite(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "httpbin", "api", "team/legacy"),
		"root.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: rw}
spec:
  virtualhost: {fqdn: rw.example.com}
  routes:
  - {match: /httpbin, prefixRewrite: /, services: [{name: httpbin, port: 80}]}
  - {match: /api, prefixRewrite: /v2/, services: [{name: api, port: 80}]}
  - {match: /old, delegate: {name: legacy, namespace: team}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: legacy, namespace: team}
spec:
  routes:
  - {match: /old, prefixRewrite: /new, services: [{name: legacy, port: 80}]}
`,
	})
	for _, tc := range []struct{ path, service, upstream, query string }{
		{"/httpbin", "httpbin", "/", ""},
		{"/httpbin/", "httpbin", "/", ""},
		{"/httpbin/get", "httpbin", "/get", ""},
		{"/httpbin/get?a=1", "httpbin", "/get", "a=1"},
		{"/httpbin/status/418", "httpbin", "/status/418", ""},
		{"/api", "api", "/v2/", ""},
		{"/api/", "api", "/v2/", ""},
		{"/api/users/7", "api", "/v2/users/7", ""},
		{"/old", "legacy", "/new", ""},
		{"/old/page", "legacy", "/new/page", ""},
	} {
		r := e.get("rw.example.com", tc.path)
		if r.status != 200 || r.service() != tc.service || r.echo.Path != tc.upstream || r.echo.Query != tc.query {
			t.Errorf("GET %s: %d from %q, upstream path %q query %q; want %q at %q query %q", tc.path, r.status, r.service(), r.echo.Path, r.echo.Query, tc.service, tc.upstream, tc.query)
		}
	}
}

// TestIngressRouteRootNamespaces: with root namespaces set (--root-namespaces), only roots
// in them are served; they may still delegate to other namespaces.
func TestIngressRouteRootNamespaces(t *testing.T) {
	t.Parallel()
	e := startWith(t, map[string]string{
		"backends.yaml": backends(t, "infra/app", "team/app"),
		"routes.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: allowed, namespace: infra}
spec:
  virtualhost: {fqdn: allowed.example.com}
  routes:
  - {match: /, services: [{name: app, port: 80}]}
  - {match: /team, delegate: {name: vertex, namespace: team}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: vertex, namespace: team}
spec:
  routes: [{match: /team, services: [{name: app, port: 80}]}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: rogue, namespace: team}
spec:
  virtualhost: {fqdn: rogue.example.com}
  routes: [{match: /, services: [{name: app, port: 80}]}]
`,
	}, app.RunOptions{RootNamespaces: []string{"infra"}})
	if r := e.get("allowed.example.com", "/"); r.status != 200 || r.echo.Namespace != "infra" {
		t.Errorf("root in infra: %d from %s/%s", r.status, r.echo.Namespace, r.service())
	}
	if r := e.get("allowed.example.com", "/team/x"); r.status != 200 || r.echo.Namespace != "team" {
		t.Errorf("vertex in team delegated from infra: %d from %s/%s", r.status, r.echo.Namespace, r.service())
	}
	if r := e.get("rogue.example.com", "/"); r.status != 404 {
		t.Errorf("root outside the root namespaces: %d from %s/%s, want 404", r.status, r.echo.Namespace, r.service())
	}
	st := checkIngressRoutes(t, e.dir, dag.Options{RootNamespaces: []string{"infra"}})
	if s := st["team/rogue"]; s.Status != dag.StatusInvalid || !strings.Contains(s.Description, "only allowed in namespaces infra") {
		t.Errorf("team/rogue: %s %q", s.Status, s.Description)
	}
}

// TestIngressRouteServiceSpellings: the seed writes a route's services as "service" (one
// object, or a list) as well as "services"; all of them route.
func TestIngressRouteServiceSpellings(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "one", "two", "three"),
		"root.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: spellings}
spec:
  virtualhost: {fqdn: spell.example.com}
  routes:
  - match: /object
    service: {name: one, port: 80}
  - match: /list
    service:
    - {name: two, port: 80}
  - match: /canonical
    services:
    - {name: three, port: 80}
`,
	})
	for path, want := range map[string]string{"/object": "one", "/list": "two", "/canonical": "three"} {
		if r := e.get("spell.example.com", path); r.status != 200 || r.service() != want {
			t.Errorf("GET %s: %d from %q, want %q", path, r.status, r.service(), want)
		}
	}
}

// The tests below need the proxy to honour route timeouts, retry policies, load-balancing
// strategies and active health checks. Each starts its own Portico, so that a proxy that
// rejects (NACKs) one of these features fails only the tests of that feature, saying so.

// TestIngressRouteRequestTimeout: timeoutPolicy.request answers 504 when the backend is
// slower; "infinity" disables the timeout.
func TestIngressRouteRequestTimeout(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "slow"),
		"root.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: timeouts}
spec:
  virtualhost: {fqdn: timeout.example.com}
  routes:
  - {match: /limited, timeoutPolicy: {request: 1s}, services: [{name: slow, port: 80}]}
  - {match: /unlimited, timeoutPolicy: {request: infinity}, services: [{name: slow, port: 80}]}
`,
	})
	concurrently(
		func() {
			began := time.Now()
			r, err := e.getE("timeout.example.com", "/limited", "X-Echo-Delay", "2s")
			took := time.Since(began)
			if err != nil || r.status != http.StatusGatewayTimeout || took < 900*time.Millisecond || took > 1900*time.Millisecond {
				t.Errorf("request timeout 1s, backend delay 2s: %d from %q after %s (%v), want 504 after about 1s", r.status, r.service(), took, err)
			}
		},
		func() {
			if r, err := e.getE("timeout.example.com", "/limited", "X-Echo-Delay", "200ms"); err != nil || r.status != 200 || r.service() != "slow" {
				t.Errorf("request timeout 1s, backend delay 200ms: %d from %q (%v)", r.status, r.service(), err)
			}
		},
		func() {
			// "infinity" cannot be told from the proxy's 15s default without waiting
			// longer than that; this checks that it is accepted and outlasts 1s.
			if r, err := e.getE("timeout.example.com", "/unlimited", "X-Echo-Delay", "2s"); err != nil || r.status != 200 || r.service() != "slow" {
				t.Errorf(`request timeout "infinity", backend delay 2s: %d from %q (%v)`, r.status, r.service(), err)
			}
		},
	)
}

// TestIngressRouteIdleTimeout: timeoutPolicy.idle answers 408 when the request sees no
// activity for that long.
func TestIngressRouteIdleTimeout(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "slow"),
		"root.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: idle}
spec:
  virtualhost: {fqdn: idle.example.com}
  routes:
  - {match: /idle, timeoutPolicy: {idle: 500ms}, services: [{name: slow, port: 80}]}
  - {match: /never, timeoutPolicy: {idle: infinity}, services: [{name: slow, port: 80}]}
`,
	})
	concurrently(
		func() {
			began := time.Now()
			r, err := e.getE("idle.example.com", "/idle", "X-Echo-Delay", "2s")
			took := time.Since(began)
			if err != nil || r.status != http.StatusRequestTimeout || took > 1500*time.Millisecond {
				t.Errorf("idle timeout 500ms, backend delay 2s: %d from %q after %s (%v), want 408 after about 500ms", r.status, r.service(), took, err)
			}
		},
		func() {
			if r, err := e.getE("idle.example.com", "/idle", "X-Echo-Delay", "100ms"); err != nil || r.status != 200 || r.service() != "slow" {
				t.Errorf("idle timeout 500ms, backend delay 100ms: %d from %q (%v)", r.status, r.service(), err)
			}
		},
		func() {
			if r, err := e.getE("idle.example.com", "/never", "X-Echo-Delay", "1s"); err != nil || r.status != 200 || r.service() != "slow" {
				t.Errorf(`idle timeout "infinity", backend delay 1s: %d from %q (%v)`, r.status, r.service(), err)
			}
		},
	)
}

// TestIngressRouteRetryPolicy: retryPolicy retries the listed status codes up to count
// times (maxRetries is the seed's other spelling of count).
func TestIngressRouteRetryPolicy(t *testing.T) {
	t.Parallel()
	failTwice := func(n int64) (int, time.Duration) {
		if n <= 2 {
			return http.StatusServiceUnavailable, 0
		}
		return 200, 0
	}
	routes := []struct {
		match, policy string
		status        int   // what the client gets
		attempts      int64 // what the backend sees
	}{
		{"/count-2", `{count: 2, onStatusCodes: ["503"]}`, 200, 3},
		{"/count-1", `{count: 1, onStatusCodes: ["503"]}`, 503, 2},
		{"/other-codes", `{count: 2, onStatusCodes: ["502", "504"]}`, 503, 1},
		{"/class", `{count: 3, onStatusCodes: ["50x"]}`, 200, 3},
		{"/max-retries", `{maxRetries: "2"}`, 200, 3},
		{"/none", ``, 503, 1},
	}
	files := map[string]string{}
	var docs []string
	flaky := map[string]*scripted{}
	root := "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: retries}\nspec:\n  virtualhost: {fqdn: retry.example.com}\n  routes:\n"
	for i, rt := range routes {
		name := fmt.Sprintf("flaky%d", i)
		s := startScripted(t, "default", name, failTwice)
		flaky[rt.match] = s
		docs = append(docs, serviceManifest("default", name, s.addr))
		root += fmt.Sprintf("  - match: %s\n    services: [{name: %s, port: 80}]\n", rt.match, name)
		if rt.policy != "" {
			root += "    retryPolicy: " + rt.policy + "\n"
		}
	}
	files["backends.yaml"] = strings.Join(docs, "---\n")
	files["root.yaml"] = root
	e := start(t, files)
	for _, rt := range routes {
		r := e.get("retry.example.com", rt.match)
		if got := flaky[rt.match].hits.Load(); r.status != rt.status || got != rt.attempts {
			t.Errorf("%s, retryPolicy %s, backend failing twice with 503: %d after %d attempts, want %d after %d", rt.match, rt.policy, r.status, got, rt.status, rt.attempts)
		}
	}
}

// TestIngressRoutePerTryTimeout: perTryTimeout abandons a slow attempt and retries.
func TestIngressRoutePerTryTimeout(t *testing.T) {
	t.Parallel()
	slowFirst := startScripted(t, "default", "slow-first", func(n int64) (int, time.Duration) {
		if n == 1 {
			return 200, 5 * time.Second
		}
		return 200, 0
	})
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("default", "slow-first", slowFirst.addr),
		"root.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: pertry}
spec:
  virtualhost: {fqdn: pertry.example.com}
  routes:
  - match: /
    services: [{name: slow-first, port: 80}]
    timeoutPolicy: {request: 4s}
    retryPolicy: {count: 1, perTryTimeout: 300ms}
`,
	})
	began := time.Now()
	r := e.get("pertry.example.com", "/")
	took := time.Since(began)
	if r.status != 200 || r.service() != "slow-first" || slowFirst.hits.Load() != 2 || took > 2*time.Second {
		t.Errorf("perTryTimeout 300ms, first attempt 5s, second immediate: %d from %q after %d attempts and %s, want 200 after 2 attempts in well under 2s",
			r.status, r.service(), slowFirst.hits.Load(), took)
	}
}

// TestIngressRouteLoadBalancingStrategies: every strategy serves traffic; Random uses
// every endpoint, RingHash and Maglev keep a client on one, and WeightedLeastRequest
// avoids an endpoint busy with a request.
func TestIngressRouteLoadBalancingStrategies(t *testing.T) {
	t.Parallel()
	a, b := startScripted(t, "default", "pool", nil), startScripted(t, "default", "pool", nil)
	strategies := []string{"RoundRobin", "Random", "WeightedLeastRequest", "RingHash", "Maglev"}
	var docs []string
	root := "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: lb}\nspec:\n  virtualhost: {fqdn: lb.example.com}\n  routes:\n"
	for _, s := range strategies {
		name := strings.ToLower(s)
		docs = append(docs, serviceManifest("default", name, a.addr, b.addr))
		root += fmt.Sprintf("  - {match: /%s, services: [{name: %s, port: 80, strategy: %s}]}\n", name, name, s)
	}
	e := start(t, map[string]string{"backends.yaml": strings.Join(docs, "---\n"), "root.yaml": root})
	spread := func(path string, n int) map[string]int {
		seen := map[string]int{}
		for i := 0; i < n; i++ {
			r := e.get("lb.example.com", path)
			if r.status != 200 {
				t.Fatalf("GET %s: %d", path, r.status)
			}
			seen[r.echo.Endpoint]++
		}
		return seen
	}
	const n = 40
	for _, s := range strategies {
		seen := spread("/"+strings.ToLower(s), n)
		switch s {
		case "RingHash", "Maglev": // the translator hashes the client's address
			if len(seen) != 1 {
				t.Errorf("strategy %s: one client reached %v, want a single endpoint", s, seen)
			}
		default:
			if seen[a.addr] < n/5 || seen[b.addr] < n/5 {
				t.Errorf("strategy %s: %v, want both endpoints used", s, seen)
			}
		}
	}

	// One request held on an endpoint: least request picks the other one unless both of
	// its two random choices are the busy endpoint (25%); round robin would give it 50%.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan struct{})
	go func() {
		defer close(held)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.httpAddr()+"/weightedleastrequest", nil)
		req.Host = "lb.example.com"
		req.Header.Set("X-Echo-Delay", "30s")
		_, _ = fetch(req, &http.Client{})
	}()
	e.eventually(5*time.Second, "a request to be held by an endpoint", func() bool { return a.inflight.Load()+b.inflight.Load() == 1 })
	busy := a
	if b.inflight.Load() == 1 {
		busy = b
	}
	const quick = 80
	seen := spread("/weightedleastrequest", quick)
	if share := float64(seen[busy.addr]) / quick; share > 0.40 {
		t.Errorf("WeightedLeastRequest: the endpoint busy with a request got %.0f%% of %d requests (%v), want about 25%%", 100*share, quick, seen)
	}
	cancel()
	<-held
}

// TestIngressRouteActiveHealthChecks (seed 003): an endpoint that fails its health check
// is taken out of the rotation after unhealthyThresholdCount failed checks, but at once
// when it answers 503, and comes back once it passes healthyThresholdCount checks again.
// The checks are counted at the backend, so the test does not depend on timing.
func TestIngressRouteActiveHealthChecks(t *testing.T) {
	t.Parallel()
	good1, good2 := startEcho(t, "default", "threshold"), startEcho(t, "default", "immediate")
	bad1 := startScripted(t, "default", "threshold", nil)
	bad2 := startScripted(t, "default", "immediate", nil)
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("default", "threshold", good1, bad1.addr) + "---\n" + serviceManifest("default", "immediate", good2, bad2.addr),
		"root.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: hc}
spec:
  virtualhost: {fqdn: hc.example.com}
  routes:
  - match: /threshold
    services:
    - name: threshold
      port: 80
      healthCheck: {path: /healthz, intervalSeconds: 1, unhealthyThresholdCount: 2, healthyThresholdCount: 1}
  - match: /immediate
    services:
    - name: immediate
      port: 80
      healthCheck: {path: /healthz, intervalSeconds: 1, unhealthyThresholdCount: 5, healthyThresholdCount: 1}
`,
	})
	// endpoints counts which endpoints answered n requests.
	endpoints := func(path string, n int) map[string]int {
		seen := map[string]int{}
		for i := 0; i < n; i++ {
			r, err := e.getE("hc.example.com", path)
			if err != nil {
				seen["error: "+err.Error()]++
				continue
			}
			seen[r.echo.Endpoint]++
		}
		return seen
	}
	inRotation := func(path, addr string) bool { return endpoints(path, 6)[addr] > 0 }
	outOfRotation := func(path, good string) bool { return endpoints(path, 10)[good] == 10 }
	for _, c := range []struct{ path, bad string }{{"/threshold", bad1.addr}, {"/immediate", bad2.addr}} {
		e.eventually(5*time.Second, "both endpoints of "+c.path+" to be healthy", func() bool { return inRotation(c.path, c.bad) })
	}
	if h, _ := bad1.hcHost.Load().(string); h != dag.DefaultHealthCheckHost {
		t.Errorf("health checks were sent with Host %q, want %q", h, dag.DefaultHealthCheckHost)
	}

	concurrently(
		func() {
			// 500 is a failed check: the endpoint stays until two checks in a row failed.
			bad1.fail(http.StatusInternalServerError)
			if !poll(5*time.Second, func() bool { return outOfRotation("/threshold", good1) }) {
				t.Errorf("the endpoint failing its health check with 500 still gets traffic after %d failed checks: %v", bad1.hcFailed.Load(), endpoints("/threshold", 10))
				return
			}
			if n := bad1.hcFailed.Load(); n < 2 {
				t.Errorf("the endpoint was taken out after %d failed check (status 500), want unhealthyThresholdCount (2): seed 003 takes an endpoint out at once only when it answers 503", n)
			}
			bad1.health.Store(http.StatusOK)
			if !poll(5*time.Second, func() bool { return inRotation("/threshold", bad1.addr) }) {
				t.Errorf("the endpoint passing its health checks again gets no traffic after 5s: %v", endpoints("/threshold", 10))
			}
		},
		func() {
			// 503 takes the endpoint out after a single check, although the threshold is 5.
			bad2.fail(http.StatusServiceUnavailable)
			if !poll(5*time.Second, func() bool { return outOfRotation("/immediate", good2) }) {
				t.Errorf("the endpoint failing its health check with 503 still gets traffic after %d failed checks: %v", bad2.hcFailed.Load(), endpoints("/immediate", 10))
				return
			}
			if n := bad2.hcFailed.Load(); n > 2 { // 2: a second check may have been answered meanwhile
				t.Errorf("the endpoint answering 503 was taken out after %d failed checks, want after the first", n)
			}
			bad2.health.Store(http.StatusOK)
			if !poll(5*time.Second, func() bool { return inRotation("/immediate", bad2.addr) }) {
				t.Errorf("the endpoint passing its health checks again gets no traffic after 5s: %v", endpoints("/immediate", 10))
			}
		},
	)
}

// TestIngressRouteExample checks examples/ingressroute: with the certificate run.sh would
// generate, every object is valid except shop/green, orphaned on purpose; and with the
// backends on ephemeral ports instead of 9101-9106, the walk-through in run.sh works.
func TestIngressRouteExample(t *testing.T) {
	t.Parallel()
	const dir = "../../examples/ingressroute/manifests"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		// What run.sh generates with portico certgen.
		"tls.generated.yaml": tlsSecretManifestIn("infra", "app-tls", testutil.SelfSigned("secure.app.localhost")),
	}
	for _, en := range entries {
		if en.IsDir() || strings.HasSuffix(en.Name(), ".generated.yaml") {
			continue // left behind by run.sh
		}
		b, err := os.ReadFile(filepath.Join(dir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[en.Name()] = string(b)
	}
	checkDir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(checkDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := checkIngressRoutes(t, checkDir, dag.Options{RootNamespaces: []string{"infra"}})
	want := map[string]dag.StatusValue{
		"infra/app": dag.StatusValid, "infra/secure": dag.StatusValid, "web/site": dag.StatusValid,
		"blog/blog": dag.StatusValid, "shop/blue": dag.StatusValid, "shop/green": dag.StatusOrphaned, "api/api": dag.StatusValid,
	}
	for name, s := range st {
		if want[name] == "" {
			t.Errorf("unexpected IngressRoute %s", name)
		}
		if s.Status != want[name] || (s.Status == dag.StatusValid && strings.Contains(s.Description, "not found")) {
			t.Errorf("%s: %s %q, want %s", name, s.Status, s.Description, want[name])
		}
	}
	if len(st) != len(want) {
		t.Errorf("%d IngressRoutes, want %d", len(st), len(want))
	}

	// The backends run.sh starts, on ephemeral ports.
	backends := files["backends.yaml"]
	for i, svc := range []string{"web/site", "blog/blog", "shop/blue", "shop/green", "api/stable", "api/canary"} {
		ns, name, _ := strings.Cut(svc, "/")
		_, port, _ := net.SplitHostPort(startEcho(t, ns, name))
		fixed := fmt.Sprintf("port: %d}", 9101+i)
		if !strings.Contains(backends, fixed) {
			t.Fatalf("backends.yaml has no %q for %s", fixed, svc)
		}
		backends = strings.Replace(backends, fixed, "port: "+port+"}", 1)
	}
	files["backends.yaml"] = backends
	e := start(t, files)
	for _, tc := range []struct{ path, ns, service, upstream string }{
		{"/", "web", "site", "/"},
		{"/blog/hello", "blog", "blog", "/hello"},
		{"/shop", "shop", "blue", "/shop"},
	} {
		if r := e.get("app.localhost", tc.path); r.status != 200 || r.echo.Namespace != tc.ns || r.service() != tc.service || r.echo.Path != tc.upstream {
			t.Errorf("app.localhost%s: %d from %s/%s at %q, want %s/%s at %q", tc.path, r.status, r.echo.Namespace, r.service(), r.echo.Path, tc.ns, tc.service, tc.upstream)
		}
	}
	if got := e.tally("app.localhost", "/api", 200); got["stable"]+got["canary"] != 200 || got["canary"] > 50 {
		t.Errorf("app.localhost/api: %v, want about 90%% stable and 10%% canary", got)
	}
	if r := e.get("secure.app.localhost", "/x?y=1"); r.status != http.StatusMovedPermanently || !strings.HasPrefix(r.header.Get("Location"), "https://secure.app.localhost") {
		t.Errorf("http://secure.app.localhost/x?y=1: %d to %q, want a redirect to HTTPS", r.status, r.header.Get("Location"))
	}
	if r := e.getTLS("secure.app.localhost", "/blog/", false); r.status != 200 || r.service() != "blog" || r.echo.Path != "/" {
		t.Errorf("https://secure.app.localhost/blog/: %d from %q at %q", r.status, r.service(), r.echo.Path)
	}
	// The blue-green switch, as run.sh describes it.
	infra := files["infra.yaml"]
	if !strings.Contains(infra, "delegate: {name: blue, namespace: shop}") {
		t.Fatal("infra.yaml no longer delegates /shop with `delegate: {name: blue, namespace: shop}`; update run.sh's instructions and this test")
	}
	e.write("infra.yaml", strings.Replace(infra, "{name: blue, namespace: shop}", "{name: green, namespace: shop}", 1))
	e.waitFor("app.localhost", "/shop", "green", 200)
}

// TestIngressPolicyAnnotations: the timeout and retry policies of seed 002 reach Ingress
// users through annotations, enforced by the proxy like the IngressRoute fields.
func TestIngressPolicyAnnotations(t *testing.T) {
	t.Parallel()
	flaky := startScripted(t, "default", "flaky", func(n int64) (int, time.Duration) {
		if n <= 2 {
			return http.StatusServiceUnavailable, 0
		}
		return http.StatusOK, 0
	})
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "slow") + "---\n" + serviceManifest("default", "flaky", flaky.addr),
		"ingress.yaml": `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: limited
  annotations:
    portico.dev/request-timeout: 1s
spec:
  rules:
  - host: annotated.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: slow, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: retried
  annotations:
    contour.heptio.com/num-retries: "2"
    portico.dev/retry-on-status-codes: "503"
spec:
  rules:
  - host: retried.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: flaky, port: {number: 80}}}}
`,
	})
	began := time.Now()
	r := e.get("annotated.example.com", "/", "X-Echo-Delay", "2s")
	if took := time.Since(began); r.status != http.StatusGatewayTimeout || took > 1900*time.Millisecond {
		t.Errorf("portico.dev/request-timeout 1s, backend delay 2s: %d after %s, want 504 after about 1s", r.status, took)
	}
	if r := e.get("retried.example.com", "/"); r.status != http.StatusOK {
		t.Errorf("2 retries on 503 against a backend failing twice: %d, want 200", r.status)
	}
	if n := flaky.hits.Load(); n != 3 {
		t.Errorf("backend saw %d requests, want 3 (1 + 2 retries)", n)
	}
}

// TestIngressRouteMetrics: /metrics carries seed 003's IngressRoute gauges.
func TestIngressRouteMetrics(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web"),
		"routes.yaml": `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: infra}
spec:
  virtualhost: {fqdn: metrics.example.com}
  routes: [{match: /, delegate: {name: site, namespace: default}}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: site}
spec:
  routes: [{match: /, services: [{name: web, port: 80}]}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: green}
spec:
  routes: [{match: /, services: [{name: web, port: 80}]}]
`,
	})
	resp, err := http.Get("http://" + e.runner.Admin().Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range []string{
		`contour_ingressroute_total{namespace="default"} 2`,
		`contour_ingressroute_total{namespace="infra"} 1`,
		`contour_ingressroute_root_total{namespace="infra"} 1`,
		`contour_ingressroute_orphaned_total{namespace="default"} 1`,
		`contour_ingressroute_valid_total{namespace="default",vhost="metrics.example.com"} 1`,
		`contour_ingressroute_valid_total{namespace="infra",vhost="metrics.example.com"} 1`,
		`contour_ingressroute_dagrebuild_timestamp `,
	} {
		if !strings.Contains(string(body), line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
