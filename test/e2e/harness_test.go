// Package e2e runs Portico end to end: manifests in a directory, the `run` pipeline, the
// embedded proxy fed over xDS, and real HTTP(S) requests to real echo backends, all on
// loopback sockets.
package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestMain removes the portico binary the CLI tests build once the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemovePorticoBinary()
	os.Exit(code)
}

// env is one running `portico run` with its manifest directory.
type env struct {
	t      *testing.T
	dir    string
	runner *app.Runner
	logs   *syncBuffer
	client *http.Client
	// opts are the options the runner was started with, for restart.
	opts app.RunOptions
	// stop stops the runner, once.
	stop func()
}

type syncBuffer = testutil.SyncBuffer

// start writes files (name → content) into a fresh manifest directory, starts Portico on
// ephemeral loopback ports and waits until it is ready.
func start(t *testing.T, files map[string]string) *env {
	t.Helper()
	return startWith(t, files, app.RunOptions{})
}

// startWith is start with more run options. ManifestDir and Logger are always the test's;
// empty listener addresses are ephemeral loopback ports.
func startWith(t *testing.T, files map[string]string, opts app.RunOptions) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	// At start-up objects are as old as their order in the tree: files in name order.
	for _, name := range slices.Sorted(maps.Keys(files)) {
		e.write(name, files[name])
	}
	opts.ManifestDir = e.dir
	e.launch(opts)
	return e
}

// launch starts Portico with opts, its Logger the test's, and waits until it is ready.
func (e *env) launch(opts app.RunOptions) {
	t := e.t
	t.Helper()
	e.logs = &syncBuffer{}
	logs := e.logs
	opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, addr := range []*string{&opts.HTTPAddr, &opts.HTTPSAddr, &opts.AdminAddr} {
		if *addr == "" {
			*addr = "127.0.0.1:0"
		}
	}
	e.opts = opts
	r, err := app.NewRunner(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.runner = r
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	e.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("portico run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("portico run did not stop within 10s")
		}
		if t.Failed() {
			t.Logf("portico logs:\n%s", logs.String())
		}
	}
	t.Cleanup(e.stop)
	e.client = &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	ready := func() bool {
		addr := r.Admin().Addr()
		if addr == "" {
			return false
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(5 * time.Second); !ready(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			if nacks := e.nacks(); len(nacks) > 0 {
				t.Fatalf("portico never became ready: the embedded proxy rejected the configuration:\n%s", strings.Join(nacks, "\n"))
			}
			t.Fatalf("timed out after 5s waiting for portico to become ready")
		}
	}
}

// restart stops Portico and starts it again with the same options (the manifest
// directory and state file included), as someone restarting `portico run` would. The
// logs are the new process's from then on.
func (e *env) restart() {
	e.t.Helper()
	e.stop()
	e.launch(e.opts)
}

// nacks returns the distinct reasons the embedded proxy gave for rejecting xDS resources.
func (e *env) nacks() []string {
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if !strings.Contains(line, "NACK") {
			continue
		}
		_, reason, ok := strings.Cut(line, " error=")
		if !ok {
			reason = line
		}
		if !seen[reason] {
			seen[reason] = true
			out = append(out, reason)
		}
	}
	return out
}

func (e *env) write(name, content string) {
	e.t.Helper()
	path := filepath.Join(e.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		e.t.Fatal(err)
	}
	// Write then rename, so the watcher never reads half a file.
	tmp := filepath.Join(e.dir, ".tmp-"+filepath.Base(name))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) remove(name string) {
	e.t.Helper()
	if err := os.Remove(filepath.Join(e.dir, name)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) httpAddr() string  { return e.runner.Proxy().ListenerAddr(translate.ListenerHTTP) }
func (e *env) httpsAddr() string { return e.runner.Proxy().ListenerAddr(translate.ListenerHTTPS) }

// result is what one request through the proxy produced.
type result struct {
	status  int
	header  http.Header
	body    string
	echo    echo.Response // zero unless an echo backend answered
	proto   string
	tlsCert string // CommonName of the certificate the server presented
}

// service is the name of the backend that answered, or "" if none did.
func (r result) service() string { return r.echo.Service }

func (e *env) do(req *http.Request, client *http.Client) result {
	e.t.Helper()
	r, err := fetch(req, client)
	if err != nil {
		e.t.Fatalf("%s %s (Host %s): %v", req.Method, req.URL, req.Host, err)
	}
	return r
}

// fetch is do for goroutines other than the test's: it returns the error instead.
func fetch(req *http.Request, client *http.Client) (result, error) {
	resp, err := client.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, body: string(body), proto: resp.Proto}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(body, &r.echo)
	}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		r.tlsCert = resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	return r, nil
}

// get sends GET path with the given Host header to the HTTP listener.
func (e *env) get(host, path string, header ...string) result {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return e.do(req, e.client)
}

// getTLS sends GET https://host/path to the HTTPS listener with SNI host.
func (e *env) getTLS(host, path string, h2 bool) result {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.doTLS(req, host, h2)
}

// doTLS sends req to the HTTPS listener with SNI host.
func (e *env) doTLS(req *http.Request, host string, h2 bool) result {
	e.t.Helper()
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{ServerName: host, InsecureSkipVerify: true}, // self-signed test certificates
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, e.httpsAddr())
		},
		ForceAttemptHTTP2: h2,
	}
	defer tr.CloseIdleConnections()
	// Like get, a redirect is the answer, not followed.
	return e.do(req, &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: e.client.CheckRedirect})
}

// eventually polls cond until it holds or timeout passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFor polls GET host/path until the backend named service answers it (or, with
// service "", until status answers), and returns how long that took.
func (e *env) waitFor(host, path, service string, status int) time.Duration {
	e.t.Helper()
	start := time.Now()
	e.eventually(5*time.Second, fmt.Sprintf("%s%s to be answered by %q with %d", host, path, service, status), func() bool {
		r := e.get(host, path)
		return r.status == status && r.service() == service
	})
	return time.Since(start)
}

// backends starts one echo server per name (namespace/name or name) and returns the
// manifests (Service + Endpoints, port "http" 80) that point at them.
func backends(t *testing.T, names ...string) string {
	t.Helper()
	var docs []string
	for _, full := range names {
		ns, name, ok := strings.Cut(full, "/")
		if !ok {
			ns, name = "default", full
		}
		addr := startEcho(t, ns, name)
		docs = append(docs, serviceManifest(ns, name, addr))
	}
	return strings.Join(docs, "---\n")
}

func startEcho(t *testing.T, ns, name string) string {
	t.Helper()
	return testutil.StartEcho(t, echo.Config{Listen: "127.0.0.1:0", Service: name, Namespace: ns})
}

// serviceManifest declares a Service with port "http" (80) whose endpoints are addrs.
func serviceManifest(ns, name string, addrs ...string) string {
	var subsets []string
	for _, a := range addrs {
		host, port, _ := net.SplitHostPort(a)
		subsets = append(subsets, fmt.Sprintf("- addresses: [{ip: %s}]\n  ports: [{name: http, port: %s}]", host, port))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: %[1]s, namespace: %[2]s}
subsets:
%[3]s
`, name, ns, strings.Join(subsets, "\n"))
}
