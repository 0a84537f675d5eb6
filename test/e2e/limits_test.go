package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
)

// rawResult sends one request with exactly the given header lines besides Host, over
// HTTP/1.1 (a hand-written request, so that no client adds headers) or HTTP/2 with prior
// knowledge (no User-Agent nor Accept-Encoding added).
func (e *env) rawResult(h2 bool, host string, headers []string) result {
	e.t.Helper()
	if h2 {
		req, err := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+"/limits", nil)
		if err != nil {
			e.t.Fatal(err)
		}
		req.Host = host
		req.Header["User-Agent"] = []string{""} // not sent
		for _, h := range headers {
			name, value, _ := strings.Cut(h, ": ")
			req.Header.Add(name, value)
		}
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &protocols, DisableCompression: true}
		defer tr.CloseIdleConnections()
		return e.do(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
	}
	conn, err := net.Dial("tcp", e.httpAddr())
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	b.WriteString("GET /limits HTTP/1.1\r\nHost: " + host + "\r\n")
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, header: resp.Header, body: string(body), proto: resp.Proto}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(body, &r.echo)
	}
	return r
}

// headerLines returns n header lines "X-H-<i>: v".
func headerLines(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("X-H-%d: v", i)
	}
	return out
}

// bigHeader is one header whose name and value add up to n bytes.
func bigHeader(n int) []string { return []string{"X-Big: " + strings.Repeat("x", n-len("X-Big"))} }

// checkHeaderLimits sends requests around the limits (size in KiB, count of header
// fields, Host included) over HTTP/1.1 and HTTP/2: within them the backend answers, beyond
// them the proxy answers 431 and the backend never sees the request.
func checkHeaderLimits(t *testing.T, e *env, host string, kb, count int) {
	t.Helper()
	const kib = 1024
	for _, c := range []struct {
		what    string
		headers []string
		want    int
	}{
		{fmt.Sprintf("%d KiB of headers", kb-1), bigHeader((kb - 1) * kib), 200},
		{fmt.Sprintf("%d KiB of headers", kb+1), bigHeader((kb + 1) * kib), 431},
		{fmt.Sprintf("%d headers", count), headerLines(count - 1), 200},
		{fmt.Sprintf("%d headers", count+1), headerLines(count), 431},
	} {
		for _, h2 := range []bool{false, true} {
			r := e.rawResult(h2, host, c.headers)
			proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]
			switch {
			case r.status != c.want:
				t.Errorf("%s, %s: status %d, want %d", proto, c.what, r.status, c.want)
			case c.want == 200 && r.service() != "web":
				t.Errorf("%s, %s: answered by %q, want the backend web", proto, c.what, r.service())
			case c.want == 431 && r.service() != "":
				t.Errorf("%s, %s: the backend %q answered a refused request", proto, c.what, r.service())
			}
		}
	}
}

// Request headers are limited as Envoy limits them by default: 60 KiB in all and 100
// headers, beyond which the client gets 431 and the backend sees nothing.
func TestRequestHeaderLimitsAreEnvoysDefaults(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web"),
		"ing.yaml":      ingressManifest("web", "limits.example.com", []pathRule{{"Prefix", "/", "web"}}, ""),
	})
	checkHeaderLimits(t, e, "limits.example.com", 60, 100)
	metrics := e.adminMetrics()
	for _, line := range []string{
		`portico_proxy_request_headers_refused_total{reason="size"} 2`,
		`portico_proxy_request_headers_refused_total{reason="count"} 2`,
	} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

// --max-request-headers-kb and --max-request-headers (RunOptions) change both limits.
func TestRequestHeaderLimitsAreConfigurable(t *testing.T) {
	e := startWith(t, map[string]string{
		"backends.yaml": backends(t, "web"),
		"ing.yaml":      ingressManifest("web", "limits.example.com", []pathRule{{"Prefix", "/", "web"}}, ""),
	}, app.RunOptions{MaxRequestHeadersKB: 8, MaxRequestHeaders: 20})
	checkHeaderLimits(t, e, "limits.example.com", 8, 20)
	// The defaults no longer apply: what they allow is refused now.
	if r := e.rawResult(false, "limits.example.com", bigHeader(59*1024)); r.status != 431 {
		t.Errorf("59 KiB of headers under an 8 KiB limit: status %d, want 431", r.status)
	}
}

// The command line takes the limits, and refuses what Envoy would refuse.
func TestRequestHeaderLimitFlags(t *testing.T) {
	out, code := runPorticoExit(t, "run", "--manifests", t.TempDir(), "--max-request-headers-kb", "8193")
	if code == 0 || !strings.Contains(out, "max-request-headers-kb") {
		t.Errorf("--max-request-headers-kb 8193: exit %d, output %q; want a refusal naming the flag", code, out)
	}
	out, code = runPorticoExit(t, "run", "--manifests", t.TempDir(), "--max-request-headers", "0")
	if code == 0 || !strings.Contains(out, "max-request-headers") {
		t.Errorf("--max-request-headers 0: exit %d, output %q; want a refusal naming the flag", code, out)
	}
	out, _ = runPorticoExit(t, "serve", "--help")
	for _, flag := range []string{"-max-request-headers-kb", "-max-request-headers "} {
		if !strings.Contains(out, flag) {
			t.Errorf("portico serve --help lacks %s", flag)
		}
	}
}

// runPorticoExit runs the portico binary and returns its combined output and exit code.
func runPorticoExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, portico(t), args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

// adminMetrics returns the admin endpoint's /metrics.
func (e *env) adminMetrics() string {
	e.t.Helper()
	resp, err := http.Get("http://" + e.runner.Admin().Addr() + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}
