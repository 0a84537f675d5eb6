package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
)

// ExternalName Services whose names resolve to this host are never connected to by
// the embedded proxy (issue 18): the names are answered by a DNS server the test runs,
// as an attacker's zone would answer them.

// externalNameManifest declares an ExternalName Service with port "http" and an Ingress
// routing host to it.
func externalNameManifest(name, externalName, port, host string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec:
  type: ExternalName
  externalName: %[2]s
  ports: [{name: http, port: %[3]s}]
---
`, name, externalName, port) + ingressManifest(name, host, []pathRule{{"Prefix", "/", name}}, "")
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// wantRefused checks that the proxy answered 502 itself, for reason, and that nothing
// behind it (an echo backend, the admin endpoint) did.
func wantRefused(t *testing.T, r result, what, reason string) {
	t.Helper()
	if r.status != 502 || r.service() != "" || !strings.Contains(r.body, "destination refused ("+reason+")") || strings.Contains(r.body, "portico_") {
		t.Errorf("%s: %d from %q with body %.200q, want 502 'destination refused (%s)' from the proxy", what, r.status, r.service(), r.body, reason)
	}
}

// A name resolving to 127.0.0.1 or ::1 reaches neither a backend listening there nor
// Portico's own admin endpoint (whose /metrics and /debug/pprof it used to return);
// the refusal is logged with the Service's name. Routes to literal loopback endpoints,
// the usual way to reach a local server in run mode, keep working.
func TestExternalNameResolvingToThisHostIsRefused(t *testing.T) {
	dns := testutil.StartDNS(t)
	secret := startEcho(t, "default", "secret")
	secret6 := testutil.StartEcho(t, echo.Config{Listen: "[::1]:0", Service: "secret6"})
	dns.Set("ext.test", "127.0.0.1")
	dns.Set("ext6.test", "::1")
	e := startWith(t, map[string]string{
		"web.yaml":  backends(t, "web") + "---\n" + ingressManifest("web", "web.test", []pathRule{{"Prefix", "/", "web"}}, ""),
		"ext.yaml":  externalNameManifest("ext", "ext.test", portOf(t, secret), "ext.test"),
		"ext6.yaml": externalNameManifest("ext6", "ext6.test", portOf(t, secret6), "ext6.test"),
	}, app.RunOptions{AllowExternalName: true, Resolver: dns.Resolver()})
	// The admin endpoint's port is known once it is bound.
	e.write("metrics.yaml", externalNameManifest("metrics", "ext.test", portOf(t, e.runner.Admin().Addr()), "metrics.test"))

	e.waitFor("web.test", "/", "web", 200)
	e.eventually(5*time.Second, "the metrics route", func() bool { return e.get("metrics.test", "/metrics").status != 404 })
	wantRefused(t, e.get("ext.test", "/"), "ext.test → 127.0.0.1", "loopback")
	wantRefused(t, e.get("ext6.test", "/"), "ext6.test → ::1", "loopback")
	for _, path := range []string{"/metrics", "/debug/pprof/", "/readyz"} {
		wantRefused(t, e.get("metrics.test", path), "metrics.test"+path+" → the admin endpoint", "loopback")
	}
	logs := e.logs.String()
	for _, want := range []string{
		`service=default/ext cluster=default/ext/` + portOf(t, secret) + ` endpoint=ext.test:` + portOf(t, secret) + ` address=127.0.0.1:` + portOf(t, secret),
		`service=default/ext6 `,
		`address=[::1]:` + portOf(t, secret6),
		`service=default/metrics `,
	} {
		if !strings.Contains(logs, `level=WARN msg="upstream connection refused: the destination is not allowed"`) || !strings.Contains(logs, want) {
			t.Errorf("no refusal logged with %q", want)
		}
	}
	checkDocumentedLine(t, "../../docs/ingress.md", logs, `msg="upstream connection refused: the destination is not allowed"`)
}

// checkDocumentedLine: the sample line of a log message in a document has the keys, in
// the order, of the first such line in logs.
func checkDocumentedLine(t *testing.T, docFile, logs, msg string) {
	t.Helper()
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	line := func(text string) string {
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, msg) {
				return l
			}
		}
		return ""
	}
	documented, real := line(string(doc)), line(logs)
	if got, want := strings.Join(logfmtKeys(documented), " "), strings.Join(logfmtKeys(real), " "); documented == "" || got != want {
		t.Errorf("%s: documented keys %q, real %q\ndocumented: %s\nreal:       %s", docFile, got, want, documented, real)
	}
}

// An Endpoints object at one of Portico's own addresses (the admin endpoint, the proxy's
// listeners) is refused even as a literal IP, while literal loopback endpoints of
// other servers are served: in run mode they are how a local server is reached.
func TestEndpointsAtPorticoOwnAddressesAreRefused(t *testing.T) {
	pprofAddr := testutil.FreeAddr(t)
	e := startWith(t, map[string]string{
		"web.yaml": backends(t, "web") + "---\n" + ingressManifest("web", "web.test", []pathRule{{"Prefix", "/", "web"}}, ""),
	}, app.RunOptions{PprofAddr: pprofAddr})
	e.write("own.yaml", serviceManifest("default", "admin", e.runner.Admin().Addr())+"---\n"+
		serviceManifest("default", "pprof", pprofAddr)+"---\n"+
		ingressManifest("pprof", "pprof.test", []pathRule{{"Prefix", "/", "pprof"}}, "")+"---\n"+
		ingressManifest("admin", "admin.test", []pathRule{{"Prefix", "/", "admin"}}, "")+"---\n"+
		serviceManifest("default", "self", e.httpAddr(), e.httpsAddr())+"---\n"+
		ingressManifest("self", "self.test", []pathRule{{"Prefix", "/", "self"}}, ""))
	e.waitFor("web.test", "/", "web", 200)
	e.eventually(5*time.Second, "the new routes", func() bool {
		return e.get("admin.test", "/metrics").status != 404 && e.get("self.test", "/").status != 404
	})
	wantRefused(t, e.get("admin.test", "/metrics"), "an endpoint at the admin address", "own_address")
	wantRefused(t, e.get("pprof.test", "/debug/pprof/"), "an endpoint at the --pprof-addr address", "own_address")
	for range 2 { // both endpoints, round robin
		wantRefused(t, e.get("self.test", "/"), "an endpoint at a proxy listener", "own_address")
	}
	if !strings.Contains(e.logs.String(), "service=default/admin ") || !strings.Contains(e.logs.String(), "service=default/self ") {
		t.Error("the refusals are not logged with their Services")
	}
}

// startEchoPair starts echo backends first on firstIP and second on secondIP, at the
// same port: what a name answers before and after its owner changes it.
func startEchoPair(t *testing.T, firstIP, secondIP, first, second string) (*echo.Server, *echo.Server) {
	t.Helper()
	for range 20 {
		a, b := testutil.ListenPair(t, firstIP, secondIP)
		addrA, addrB := a.Addr().String(), b.Addr().String()
		a.Close()
		b.Close()
		sa := echo.New(echo.Config{Listen: addrA, Service: first})
		if sa.Start() != nil {
			continue
		}
		sb := echo.New(echo.Config{Listen: addrB, Service: second})
		if sb.Start() != nil {
			shutdown(sa)
			continue
		}
		t.Cleanup(func() { shutdown(sa); shutdown(sb) })
		return sa, sb
	}
	t.Fatal("no port to start both backends on")
	return nil, nil
}

func shutdown(s *echo.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// A name answering a working backend first and 127.0.0.1 after (DNS rebinding): the
// first request is answered, the later ones are refused, and the backend that listens
// on loopback at the same port never answers.
func TestExternalNameTurningToLoopbackIsRefused(t *testing.T) {
	ip := testutil.NonLoopbackIP(t)
	dns := testutil.StartDNS(t)
	good, _ := startEchoPair(t, ip, "127.0.0.1", "good", "secret")
	dns.Set("flip.test", ip)
	e := startWith(t, map[string]string{
		"flip.yaml": externalNameManifest("flip", "flip.test", portOf(t, good.Addr()), "flip.test"),
	}, app.RunOptions{AllowExternalName: true, Resolver: dns.Resolver()})
	if r := e.get("flip.test", "/"); r.status != 200 || r.service() != "good" {
		t.Fatalf("first request: %d from %q, want 200 from good", r.status, r.service())
	}
	dns.Set("flip.test", "127.0.0.1")
	// The good backend stops, closing the connection the proxy keeps to it: the next
	// requests connect again, to what the name answers now.
	shutdown(good)
	for i := range 5 {
		wantRefused(t, e.get("flip.test", "/"), fmt.Sprintf("request %d after the change", i+2), "loopback")
	}
	if !strings.Contains(e.logs.String(), "service=default/flip ") {
		t.Error("no refusal logged for default/flip")
	}
}
