package e2e

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
)

// HTTPProxy services' upstream protocols (h2c, tls, h2, validation) against real TLS and
// HTTP/2 backends, and failurePolicy: retries (seed 004's "Request failures") and the
// passive health check (outlier ejection) observed on real endpoints.

// startTLSEcho starts `portico echo` with cert (TLS, h2 and HTTP/1.1 by ALPN) and returns
// its address.
func startTLSEcho(t *testing.T, ns, name string, cert testutil.Cert) string {
	t.Helper()
	return testutil.StartTLSEcho(t, echo.Config{Service: name, Namespace: ns}, cert)
}

// tlsBackend is a TLS backend (h2 and HTTP/1.1 by ALPN) that counts the requests it gets
// and records the SNI of the last one; it answers like an echo backend.
type tlsBackend struct {
	ns, name, addr string
	hits           atomic.Int64
	sni            atomic.Value // string
}

func startTLSBackend(t *testing.T, ns, name string, cert testutil.Cert) *tlsBackend {
	t.Helper()
	b := &tlsBackend{ns: ns, name: name}
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		b.sni.Store(r.TLS.ServerName)
		body, _ := json.Marshal(echo.Response{Service: b.name, Namespace: b.ns, Endpoint: b.addr, Path: r.URL.EscapedPath(), Host: r.Host, Method: r.Method, Proto: r.Proto, TLS: true})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	b.addr = srv.Listener.Addr().String()
	return b
}

// caSecretManifest is a Secret holding ca.crt, as services' validation.caSecret names.
func caSecretManifest(ns, name string, ca testutil.Cert) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s}
data:
  ca.crt: %s
`, name, ns, base64.StdEncoding.EncodeToString(ca.CertPEM))
}

// TestHTTPProxyUpstreamProtocols: protocol h2c speaks HTTP/2 in clear text to the backend,
// tls HTTP/1.1 over TLS, h2 HTTP/2 over TLS; with validation the backend's certificate
// must chain to caSecret and carry subjectName, which is sent as SNI. A certificate that
// fails validation is a connection failure the proxy answers (502), and no request reaches
// the backend.
func TestHTTPProxyUpstreamProtocols(t *testing.T) {
	t.Parallel()
	backendCert := testutil.SelfSigned("backend.up.svc") // its own CA
	otherCA := testutil.SelfSigned("other-ca.up.svc")
	verified := startTLSBackend(t, "up", "verified", backendCert)
	wrongName := startTLSBackend(t, "up", "wrong-name", backendCert)
	wrongCA := startTLSBackend(t, "up", "wrong-ca", backendCert)
	unverified := startTLSBackend(t, "up", "unverified", backendCert)
	docs := []string{
		backends(t, "up/plain"),
		serviceManifest("up", "tls-echo", startTLSEcho(t, "up", "tls-echo", backendCert)),
		serviceManifest("up", "verified", verified.addr),
		serviceManifest("up", "wrong-name", wrongName.addr),
		serviceManifest("up", "wrong-ca", wrongCA.addr),
		serviceManifest("up", "unverified", unverified.addr),
		caSecretManifest("up", "backend-ca", backendCert),
		caSecretManifest("up", "other-ca", otherCA),
	}
	e := start(t, map[string]string{
		"backends.yaml": strings.Join(docs, "---\n"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: up, namespace: up}
spec:
  virtualhost: {fqdn: up.example.com}
  routes:
  - conditions: [{prefix: /h1}]
    services: [{name: plain, port: 80}]
  - conditions: [{prefix: /h2c}]
    services: [{name: plain, port: 80, protocol: h2c}]
  - conditions: [{prefix: /tls}]
    services: [{name: tls-echo, port: 80, protocol: tls}]
  - conditions: [{prefix: /h2}]
    services: [{name: tls-echo, port: 80, protocol: h2}]
  - conditions: [{prefix: /verified}]
    services: [{name: verified, port: 80, protocol: tls, validation: {caSecret: backend-ca, subjectName: backend.up.svc}}]
  - conditions: [{prefix: /verified-h2}]
    services: [{name: verified, port: 80, protocol: h2, validation: {caSecret: backend-ca, subjectName: backend.up.svc}}]
  - conditions: [{prefix: /wrong-name}]
    services: [{name: wrong-name, port: 80, protocol: tls, validation: {caSecret: backend-ca, subjectName: other.up.svc}}]
  - conditions: [{prefix: /wrong-ca}]
    services: [{name: wrong-ca, port: 80, protocol: tls, validation: {caSecret: other-ca, subjectName: backend.up.svc}}]
  - conditions: [{prefix: /unverified}]
    services: [{name: unverified, port: 80, protocol: tls}]
`,
	})
	for _, c := range []struct {
		path, from, proto string
		tls               bool
	}{
		{"/h1", "up/plain", "HTTP/1.1", false},
		{"/h2c", "up/plain", "HTTP/2.0", false},
		{"/tls", "up/tls-echo", "HTTP/1.1", true},
		{"/h2", "up/tls-echo", "HTTP/2.0", true},
		{"/verified", "up/verified", "HTTP/1.1", true},
		{"/verified-h2", "up/verified", "HTTP/2.0", true},
		{"/unverified", "up/unverified", "HTTP/1.1", true},
	} {
		for i := 0; i < 3; i++ { // new and reused upstream connections
			r := e.get("up.example.com", c.path+"/x")
			if got := answeredBy(r); r.status != 200 || got != c.from || r.echo.Proto != c.proto || r.echo.TLS != c.tls || r.echo.Path != c.path+"/x" {
				t.Errorf("GET %s/x: %d from %q, backend saw %s (TLS %v) at %q; want 200 from %s over %s (TLS %v)", c.path, r.status, got, r.echo.Proto, r.echo.TLS, r.echo.Path, c.from, c.proto, c.tls)
			}
		}
	}
	if sni, _ := verified.sni.Load().(string); sni != "backend.up.svc" {
		t.Errorf("with validation, the backend saw SNI %q, want the subjectName backend.up.svc", sni)
	}
	if sni, _ := unverified.sni.Load().(string); sni != "" {
		t.Errorf("without validation, the backend saw SNI %q, want none", sni)
	}
	for _, c := range []struct {
		path string
		b    *tlsBackend
	}{{"/wrong-name", wrongName}, {"/wrong-ca", wrongCA}} {
		for i := 0; i < 3; i++ {
			// The proxy answers for an upstream it cannot connect to: 502, as for a refused
			// connection (docs/ingress.md); Envoy would say 503. Either way, with the cause.
			r := e.get("up.example.com", c.path)
			if (r.status != 502 && r.status != 503) || r.service() != "" || !strings.Contains(r.body, "connection failure") {
				t.Errorf("GET %s: %d from %q (%q), want a 502 or 503 from the proxy naming a connection failure", c.path, r.status, r.service(), r.body)
			}
		}
		if n := c.b.hits.Load(); n != 0 {
			t.Errorf("%s: the backend whose certificate fails validation got %d requests", c.path, n)
		}
	}
}

// TestHTTPProxySeedRequestFailures is seed 004's "Request failures" example: timeoutPolicy
// with failurePolicy count 3 and perTryTimeout. A backend failing twice then succeeding is
// retried and the client gets its answer; an attempt slower than perTryTimeout is
// abandoned and retried; retryPolicyEnabled: false turns retries off; 4xx answers are not
// retried (retryOn defaults to 5xx). The seed's timeouts (1s, 150ms) are scaled up so that
// attempts answered at once cannot time out on a loaded machine.
func TestHTTPProxySeedRequestFailures(t *testing.T) {
	t.Parallel()
	failTwice := func(n int64) (int, time.Duration) {
		if n <= 2 {
			return http.StatusServiceUnavailable, 0
		}
		return 200, 0
	}
	flaky := startScripted(t, "default", "flaky", failTwice)
	slowFirst := startScripted(t, "default", "slow-first", func(n int64) (int, time.Duration) {
		if n == 1 {
			return 200, time.Minute
		}
		return 200, 0
	})
	noRetry := startScripted(t, "default", "no-retry", failTwice)
	notFound := startScripted(t, "default", "not-found", func(int64) (int, time.Duration) { return 404, 0 })
	tooMany := startScripted(t, "default", "too-many", func(int64) (int, time.Duration) { return 502, 0 })
	var docs []string
	for _, s := range []*scripted{flaky, slowFirst, noRetry, notFound, tooMany} {
		docs = append(docs, serviceManifest(s.ns, s.name, s.addr))
	}
	route := func(path, svc, failure string) string {
		return fmt.Sprintf(`
  - conditions: [{prefix: %s}]
    services: [{name: %s, port: 80}]
    timeoutPolicy: {response: 20s}
    failurePolicy: %s`, path, svc, failure)
	}
	e := start(t, map[string]string{
		"backends.yaml": strings.Join(docs, "---\n"),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: timeout}
spec:
  virtualhost: {fqdn: timeout.bar.com}
  routes:` +
			route("/", "flaky", "{count: 3, perTryTimeout: 3s, passiveHealthCheckEnabled: true, retryPolicyEnabled: true}") +
			route("/slow", "slow-first", "{count: 3, perTryTimeout: 2s}") +
			route("/off", "no-retry", "{count: 3, retryPolicyEnabled: false}") +
			route("/notfound", "not-found", "{count: 3}") +
			route("/many", "too-many", "{count: 3}") + "\n",
	})
	if r := e.get("timeout.bar.com", "/"); r.status != 200 || r.service() != "flaky" || flaky.hits.Load() != 3 {
		t.Errorf("backend failing twice with 503, count 3: %d from %q after %d attempts, want 200 after 3", r.status, r.service(), flaky.hits.Load())
	}
	if r := e.get("timeout.bar.com", "/slow"); r.status != 200 || r.service() != "slow-first" || slowFirst.hits.Load() != 2 {
		t.Errorf("first attempt hanging, perTryTimeout 2s: %d from %q after %d attempts, want 200 after 2", r.status, r.service(), slowFirst.hits.Load())
	}
	if r := e.get("timeout.bar.com", "/off"); r.status != 503 || noRetry.hits.Load() != 1 {
		t.Errorf("retryPolicyEnabled: false: %d after %d attempts, want the backend's 503 after 1", r.status, noRetry.hits.Load())
	}
	if r := e.get("timeout.bar.com", "/notfound"); r.status != 404 || notFound.hits.Load() != 1 {
		t.Errorf("a 404 answer: %d after %d attempts, want 404 after 1 (retryOn defaults to 5xx)", r.status, notFound.hits.Load())
	}
	if r := e.get("timeout.bar.com", "/many"); r.status != 502 || tooMany.hits.Load() != 4 {
		t.Errorf("a backend always answering 502, count 3: %d after %d attempts, want 502 after 4", r.status, tooMany.hits.Load())
	}
	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "default/timeout", dag.StatusValid, "")
}

// outlierMetrics reads the outlier detection metrics of a Service port, given as
// namespace/service/port: endpoints ejected now, and ejections so far.
func outlierMetrics(e *env, servicePort string) (ejected, ejections float64) {
	parts := strings.Split(servicePort, "/")
	labels := []string{`service_namespace="` + parts[0] + `"`, `service_name="` + parts[1] + `"`, `service_port="` + parts[2] + `"`}
	for _, line := range strings.Split(e.adminMetrics(), "\n") {
		var into *float64
		switch {
		case strings.HasPrefix(line, "portico_proxy_cluster_ejected_endpoints{"):
			into = &ejected
		case strings.HasPrefix(line, "portico_proxy_upstream_outlier_ejections_total{"):
			into = &ejections
		default:
			continue
		}
		if !strings.Contains(line, labels[0]) || !strings.Contains(line, labels[1]) || !strings.Contains(line, labels[2]) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			*into += v
		}
	}
	return ejected, ejections
}

// TestHTTPProxyOutlierEjection: failurePolicy's passive health check on a Service of two
// endpoints, one answering 500 to everything. After consecutive5xx failures in a row the
// failing endpoint is ejected: it gets no traffic while ejected; after baseEjectionTime it
// gets traffic again. With retries off the clients see the raw 500s; with retries on
// (the default) they never do.
//
// Whether a request was sent while the endpoint was ejected is read from the proxy's
// metrics (ejected now, and ejections so far, unchanged around the request), never
// from the clock.
func TestHTTPProxyOutlierEjection(t *testing.T) {
	t.Parallel()
	good := startEcho(t, "out", "good")
	bad := startScripted(t, "out", "bad", func(int64) (int, time.Duration) { return 500, 0 })
	bad1 := startScripted(t, "out", "bad1", func(int64) (int, time.Duration) { return 500, 0 })
	bad2 := startScripted(t, "out", "bad2", func(int64) (int, time.Duration) { return 500, 0 })
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("out", "pool", good, bad.addr) + "---\n" + serviceManifest("out", "retried", good, bad.addr) +
			"---\n" + serviceManifest("out", "allbad", bad1.addr, bad2.addr),
		"proxy.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: outlier, namespace: out}
spec:
  virtualhost: {fqdn: outlier.example.com}
  routes:
  - conditions: [{prefix: /raw}]
    services: [{name: pool, port: 80}]
    failurePolicy: {retryPolicyEnabled: false, consecutive5xx: 3, interval: 100ms, baseEjectionTime: 1s}
  - conditions: [{prefix: /retried}]
    services: [{name: retried, port: 80}]
    failurePolicy: {consecutive5xx: 3, interval: 100ms, baseEjectionTime: 1s}
  - conditions: [{prefix: /allbad}]
    services: [{name: allbad, port: 80}]
    failurePolicy: {retryPolicyEnabled: false, consecutive5xx: 2, interval: 100ms, baseEjectionTime: 10m}
`,
	})
	const pool = "out/pool/http"

	// Until the failing endpoint has failed three times, nothing is ejected.
	began := time.Now()
	var lastEjectable time.Time
	for bad.hits.Load() < 3 {
		if ejected, n := outlierMetrics(e, pool); ejected != 0 || n != 0 {
			t.Fatalf("an endpoint was ejected after %d failures, before consecutive5xx (3)", bad.hits.Load())
		}
		if time.Since(began) > 30*time.Second {
			t.Fatalf("the failing endpoint got %d requests in 30s", bad.hits.Load())
		}
		lastEjectable = time.Now()
		r := e.get("outlier.example.com", "/raw")
		switch answeredBy(r) {
		case "out/good":
		case "out/bad":
			if r.status != 500 {
				t.Fatalf("the failing endpoint's answer reached the client as %d, want its 500 (retries are off)", r.status)
			}
		default:
			t.Fatalf("GET /raw: %d from %q", r.status, answeredBy(r))
		}
	}
	hitsAtEjection := bad.hits.Load()
	e.eventually(10*time.Second, "the failing endpoint to be ejected", func() bool {
		ejected, n := outlierMetrics(e, pool)
		return ejected == 1 && n == 1
	})

	// While it is ejected, every request goes to the good endpoint.
	confirmed := 0
	for deadline := time.Now().Add(60 * time.Second); confirmed < 20; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests were sent while the endpoint was ejected in 60s", confirmed)
		}
		ejected0, n0 := outlierMetrics(e, pool)
		r := e.get("outlier.example.com", "/raw")
		ejected1, n1 := outlierMetrics(e, pool)
		if ejected0 != 1 || ejected1 != 1 || n0 != n1 {
			continue // the ejection ended around this request: it proves nothing
		}
		confirmed++
		if got := answeredBy(r); r.status != 200 || got != "out/good" {
			t.Fatalf("a request sent while the failing endpoint was ejected: %d from %q, want 200 from out/good", r.status, got)
		}
	}

	// After baseEjectionTime it is back in rotation and gets requests again.
	e.eventually(60*time.Second, "the ejected endpoint to get traffic again", func() bool {
		e.get("outlier.example.com", "/raw")
		return bad.hits.Load() > hitsAtEjection
	})
	if took := time.Since(lastEjectable); took < time.Second {
		t.Errorf("the ejected endpoint got traffic again %s after it was ejected, before baseEjectionTime (1s)", took)
	}

	// With retries (failurePolicy's default, count 1 on 5xx) clients get answers from the
	// good endpoint while the failing one is found out and ejected.
	for i := 0; i < 20; i++ {
		if r := e.get("outlier.example.com", "/retried"); r.status != 200 || answeredBy(r) != "out/good" {
			t.Errorf("GET /retried (retries on): %d from %q, want 200 from out/good", r.status, answeredBy(r))
		}
	}
	e.eventually(10*time.Second, "the failing endpoint to be ejected from the retried route's cluster", func() bool {
		_, n := outlierMetrics(e, "out/retried/http")
		return n >= 1
	})

	// Both endpoints of a Service failing: maxEjectionPercent (50 by default) lets one of
	// the two be ejected, never both; the other keeps getting the requests.
	for i := 0; i < 20; i++ {
		if r := e.get("outlier.example.com", "/allbad"); r.status != 500 {
			t.Fatalf("GET /allbad: %d from %q, want a backend's 500", r.status, answeredBy(r))
		}
		if ejected, _ := outlierMetrics(e, "out/allbad/http"); ejected > 1 {
			t.Fatalf("%v of the 2 endpoints ejected, beyond maxEjectionPercent 50", ejected)
		}
	}
	e.eventually(10*time.Second, "one of two failing endpoints to be ejected", func() bool {
		ejected, _ := outlierMetrics(e, "out/allbad/http")
		return ejected == 1
	})
	h1, h2 := bad1.hits.Load(), bad2.hits.Load()
	for i := 0; i < 10; i++ {
		e.get("outlier.example.com", "/allbad")
	}
	if d1, d2 := bad1.hits.Load()-h1, bad2.hits.Load()-h2; d1+d2 != 10 || (d1 != 0 && d2 != 0) {
		t.Errorf("with one of two endpoints ejected for 10m, 10 requests went %d and %d to them, want all to the other one", d1, d2)
	}
}
