package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// ranBinary is a `portico run` process of a test, started by runWithConfig.
type ranBinary struct {
	t                        *testing.T
	http, https, config, dir string
	admin                    string
	logs                     *syncBuffer
}

// runWithConfig starts the portico binary on the manifests in files with --config
// holding config, and waits until it is ready.
func runWithConfig(t *testing.T, files map[string]string, config string) *ranBinary {
	t.Helper()
	dir, confDir := t.TempDir(), t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &ranBinary{t: t, http: testutil.FreeAddr(t), https: testutil.FreeAddr(t), config: filepath.Join(confDir, "contour.yaml"), dir: dir, logs: &syncBuffer{}}
	if err := os.WriteFile(r.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	r.admin = testutil.FreeAddr(t)
	admin := r.admin
	cmd := exec.Command(portico(t), "run", dir, "--config", r.config, "--http-addr", r.http, "--https-addr", r.https, "--admin-addr", admin, "--state-file", "none")
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("logs:\n%s", r.logs.String())
		}
	})
	r.eventually("/readyz to answer 200", func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return r
}

func (r *ranBinary) eventually(what string, cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// objectStatus returns the status ("valid", "invalid", ...) and description of an
// object in the latest build (the admin endpoint's /statuses), "" when it has none yet.
func (r *ranBinary) objectStatus(kind, namespace, name string) (string, string) {
	resp, err := http.Get("http://" + r.admin + "/statuses")
	if err != nil {
		return "", ""
	}
	defer resp.Body.Close()
	var rows []struct{ Kind, Namespace, Name, Status, Description string }
	if json.NewDecoder(resp.Body).Decode(&rows) != nil {
		return "", ""
	}
	for _, row := range rows {
		if row.Kind == kind && row.Namespace == namespace && row.Name == name {
			return row.Status, row.Description
		}
	}
	return "", ""
}

// get sends GET path with Host host to the HTTP listener, with the header pairs given.
func (r *ranBinary) get(host, path string, header ...string) result {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+r.http+path, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse } // a redirect is the answer
	res, err := fetch(req, &http.Client{Timeout: 30 * time.Second, CheckRedirect: noRedirects})
	if err != nil {
		r.t.Fatalf("GET %s%s: %v", host, path, err)
	}
	return res
}

// getTLS sends GET https://host/ to the HTTPS listener, offering TLS versions up to max.
func (r *ranBinary) getTLS(host string, max uint16) (result, error) {
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{ServerName: host, InsecureSkipVerify: true, MaxVersion: max}, // self-signed test certificate
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, r.https)
		},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	return fetch(req, &http.Client{Transport: tr, Timeout: 30 * time.Second})
}

// A team's Contour configuration file, given to `portico run --config`: each setting
// shows in real traffic (the Server header, repeated slashes, the client address behind
// one trusted proxy, the TLS floors of clients and of backends, the stream idle timeout, permitInsecure
// disabled, the installation's headers policies, HTTP/1.1 only), and a change of the file
// while running is logged as needing a restart.
func TestRunContourConfigFile(t *testing.T) {
	t.Parallel()
	backendCert := testutil.SelfSigned("backend.cc.svc")
	manifests := map[string]string{
		"backends.yaml": strings.Join([]string{backends(t, "cc/web", "legacy"), ingressManifest("legacy", "legacy.cc.test", []pathRule{{"Prefix", "/", "legacy"}}, ""), tlsSecretManifestIn("cc", "cert", testutil.SelfSigned("secure.cc.test")),
			serviceManifest("cc", "tls13", startTLSEcho(t, "cc", "tls13", backendCert)),
			serviceManifest("cc", "tls12", startTLS12Backend(t, backendCert))}, "---\n"),
		"proxies.yaml": `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: plain, namespace: cc}
spec:
  virtualhost:
    fqdn: plain.cc.test
    ipDenyPolicy: [{source: Remote, cidr: 203.0.113.0/24}]
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /own}]
    requestHeadersPolicy: {set: [{name: X-Env, value: route}]}
    services: [{name: web, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: secure, namespace: cc}
spec:
  virtualhost: {fqdn: secure.cc.test, tls: {secretName: cert}}
  routes: [{services: [{name: web, port: 80}], permitInsecure: true}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: upstream, namespace: cc}
spec:
  virtualhost: {fqdn: upstream.cc.test}
  routes:
  - conditions: [{prefix: /tls13}]
    services: [{name: tls13, port: 80, protocol: tls}]
  - conditions: [{prefix: /tls12}]
    services: [{name: tls12, port: 80, protocol: tls}]
`,
	}
	const config = `# as Contour reads it
serverHeaderTransformation: pass_through
disableMergeSlashes: true
disablePermitInsecure: true
default-http-versions: [HTTP/1.1]
policy:
  request-headers: {set: {X-Env: prod, X-Namespace: "%CONTOUR_NAMESPACE%"}, remove: [X-Debug]}
  response-headers: {set: {X-Served-By: portico}}
  applyToIngress: true
network:
  num-trusted-hops: 1
tls:
  minimum-protocol-version: "1.3"
cluster:
  upstream-tls: {minimum-protocol-version: "1.3"}
timeouts:
  stream-idle-timeout: 3s # long enough that no other request here idles that long
  connect-timeout: 1s
log-level: info # a flag name, next to Contour's keys
`
	r := runWithConfig(t, manifests, config)
	r.eventually("plain.cc.test to be served", func() bool { return r.get("plain.cc.test", "/").service() == "web" })

	res := r.get("plain.cc.test", "/a//b")
	if res.echo.Path != "/a//b" {
		t.Errorf("disableMergeSlashes: true: the backend saw %q, want /a//b", res.echo.Path)
	}
	if s, ok := res.header["Server"]; ok {
		t.Errorf("serverHeaderTransformation: pass_through: Server %q, want none (the backend sends none)", s)
	}
	res = r.get("plain.cc.test", "/", "X-Debug", "1")
	if h := http.Header(res.echo.Headers); h.Get("X-Env") != "prod" || h.Get("X-Namespace") != "cc" || h.Get("X-Debug") != "" || res.header.Get("X-Served-By") != "portico" {
		t.Errorf("policy: the backend saw X-Env %q, X-Namespace %q, X-Debug %q; the client X-Served-By %q; want prod, cc, none, portico",
			h.Get("X-Env"), h.Get("X-Namespace"), h.Get("X-Debug"), res.header.Get("X-Served-By"))
	}
	if got := http.Header(r.get("legacy.cc.test", "/").echo.Headers).Get("X-Namespace"); got != "default" {
		t.Errorf("policy.applyToIngress: an Ingress backend saw X-Namespace %q, want default", got)
	}
	if got := http.Header(r.get("plain.cc.test", "/own").echo.Headers).Get("X-Env"); got != "route" {
		t.Errorf("policy: a route that sets X-Env itself: the backend saw %q, want the route's value", got)
	}
	if res := r.get("plain.cc.test", "/", "X-Forwarded-For", "203.0.113.9"); res.status != http.StatusForbidden {
		t.Errorf("num-trusted-hops: 1, X-Forwarded-For in the denied block: %d, want 403", res.status)
	}
	if res := r.get("plain.cc.test", "/", "X-Forwarded-For", "198.51.100.1"); res.status != http.StatusOK {
		t.Errorf("num-trusted-hops: 1, X-Forwarded-For outside the denied block: %d, want 200", res.status)
	}
	if res := r.get("plain.cc.test", "/", "X-Echo-Delay", "25s"); res.status != http.StatusRequestTimeout {
		t.Errorf("stream-idle-timeout: 3s, a backend silent for 25s: %d, want 408", res.status)
	}

	r.eventually("secure.cc.test over TLS 1.3", func() bool {
		res, err := r.getTLS("secure.cc.test", tls.VersionTLS13)
		return err == nil && res.service() == "web"
	})
	if _, err := r.getTLS("secure.cc.test", tls.VersionTLS12); err == nil {
		t.Errorf("tls.minimum-protocol-version 1.3: a TLS 1.2 client was served")
	}
	if conn, err := tls.Dial("tcp", r.https, &tls.Config{ServerName: "secure.cc.test", InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}); err != nil { // self-signed test certificate
		t.Errorf("TLS to secure.cc.test: %v", err)
	} else {
		if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("default-http-versions [HTTP/1.1]: ALPN chose %q, want http/1.1", p)
		}
		conn.Close()
	}
	if res := r.get("upstream.cc.test", "/tls13"); res.service() != "tls13" {
		t.Errorf("cluster.upstream-tls minimum 1.3, a backend that speaks TLS 1.3: %d from %q, want tls13's answer", res.status, res.service())
	}
	if res := r.get("upstream.cc.test", "/tls12"); res.status < 500 {
		t.Errorf("cluster.upstream-tls minimum 1.3, a backend that stops at TLS 1.2: %d, want a connect failure (5xx)", res.status)
	}
	if res := r.get("secure.cc.test", "/"); res.status != http.StatusMovedPermanently {
		t.Errorf("disablePermitInsecure: true, plain HTTP to a permitInsecure route: %d, want 301 to HTTPS", res.status)
	}

	if err := os.WriteFile(r.config, []byte(strings.Replace(config, "stream-idle-timeout: 3s", "stream-idle-timeout: 1m", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r.eventually("the change of the file logged as needing a restart", func() bool {
		logs := r.logs.String()
		return strings.Contains(logs, "restart portico to apply it") && strings.Contains(logs, "changed=[timeouts.stream-idle-timeout]")
	})
	if res := r.get("plain.cc.test", "/", "X-Echo-Delay", "25s"); res.status != http.StatusRequestTimeout {
		t.Errorf("after the change, before a restart: %d, want 408 still", res.status)
	}
}

// startTLS12Backend starts a TLS backend that speaks TLS 1.2 at most, and returns its
// address.
func startTLS12Backend(t *testing.T, cert testutil.Cert) string {
	t.Helper()
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("tls 1.2\n")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MaxVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// A setting Portico cannot honour stops `portico run` with the line, the key and what
// to do; nothing is silently ignored.
func TestRunContourConfigRefused(t *testing.T) {
	t.Parallel()
	dir, conf := t.TempDir(), filepath.Join(t.TempDir(), "contour.yaml")
	if err := os.WriteFile(conf, []byte("network:\n  num-trusted-hops: 1\ntracing:\n  extensionService: tracing/otel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runBinary(t, portico(t), "run", dir, "--config", conf)
	if code != 1 || !strings.Contains(stderr, "contour.yaml: line 3: tracing: tracing is not supported yet") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	if err := os.WriteFile(conf, []byte("timeouts:\n  stream-idle-timeout: 5 minutes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = runBinary(t, portico(t), "run", dir, "--config", conf)
	if code != 1 || !strings.Contains(stderr, `line 2: timeouts.stream-idle-timeout: "5 minutes" is not a duration`) {
		t.Errorf("a bad duration: exit %d, stderr:\n%s", code, stderr)
	}
}

// As in Contour, repeated slashes are merged before routing and forwarding unless
// disableMergeSlashes (--disable-merge-slashes) says otherwise.
func TestMergeSlashesByDefault(t *testing.T) {
	t.Parallel()
	e := start(t, map[string]string{
		"all.yaml": backends(t, "ms/web") + "---\n" + `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ms, namespace: ms}
spec:
  virtualhost: {fqdn: ms.test}
  routes:
  - conditions: [{prefix: /a/b}]
    services: [{name: web, port: 80}]
`,
	})
	e.waitFor("ms.test", "/a/b", "web", http.StatusOK)
	if r := e.get("ms.test", "//a///b"); r.service() != "web" || r.echo.Path != "/a/b" {
		t.Errorf("GET //a///b: %d from %q, path %q; want /a/b's route and the backend to see /a/b", r.status, r.service(), r.echo.Path)
	}
}

// A ContourConfiguration object as kubectl prints it, given to `portico run --config`:
// its httpproxy.rootNamespaces and envoy.listener settings are what the proxy serves.
func TestRunContourConfigurationObject(t *testing.T) {
	t.Parallel()
	root := func(ns string) string {
		return `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: ` + ns + `}
spec:
  virtualhost: {fqdn: ` + ns + `.cco.test}
  routes: [{services: [{name: web, port: 80}]}]
`
	}
	r := runWithConfig(t, map[string]string{
		"all.yaml": strings.Join([]string{backends(t, "infra/web", "team/web"), root("infra"), root("team")}, "---\n"),
	}, `apiVersion: projectcontour.io/v1alpha1
kind: ContourConfiguration
metadata: {name: contour, namespace: projectcontour}
spec:
  httpproxy:
    rootNamespaces: [infra]
  envoy:
    listener:
      disableMergeSlashes: true
      serverHeaderTransformation: pass_through
status: {}
`)
	r.eventually("infra.cco.test to be served", func() bool { return r.get("infra.cco.test", "/").service() == "web" })
	res := r.get("infra.cco.test", "/a//b")
	if _, ok := res.header["Server"]; ok || res.echo.Path != "/a//b" {
		t.Errorf("envoy.listener settings: Server %q, path %q; want no Server header and /a//b", res.header.Get("Server"), res.echo.Path)
	}
	if res := r.get("team.cco.test", "/"); res.status != http.StatusNotFound {
		t.Errorf("httpproxy.rootNamespaces [infra]: the root in team answered %d, want 404 (not served)", res.status)
	}
}
