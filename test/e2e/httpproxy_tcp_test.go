package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
)

// HTTPProxy tcpproxy with real TLS clients: passthrough (the client's TLS session is with
// the backend, chosen by SNI) and termination (the proxy's certificate, then plain bytes
// to a TCP backend).

// pool is a certificate pool holding c, to verify a server that presents c.
func pool(t *testing.T, c testutil.Cert) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(c.CertPEM) {
		t.Fatal("bad test certificate")
	}
	return p
}

// verifiedClient is an HTTP client whose connections go to addr, with TLS verified
// against roots for the URL's host as SNI; h2 offers HTTP/2 by ALPN.
func verifiedClient(addr string, roots *x509.CertPool, h2 bool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		ForceAttemptHTTP2: h2,
	}}
}

// startTCPEcho starts a TCP server that sends back every byte it receives.
func startTCPEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// passthroughProxy passes pass.example.com's TLS connections through to the Service
// tcp/secure-app.
const passthroughProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: pass, namespace: tcp}
spec:
  virtualhost:
    fqdn: pass.example.com
    tls: {passthrough: true}
  tcpproxy:
    services: [{name: secure-app, port: 80}]
`

// rawTCPProxy terminates raw.example.com's TLS (secret tcp/raw-tls) and sends the
// plaintext to the Service tcp/tcp-echo.
const rawTCPProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: raw, namespace: tcp}
spec:
  virtualhost:
    fqdn: raw.example.com
    tls: {secretName: raw-tls}
  tcpproxy:
    services: [{name: tcp-echo, port: 80}]
`

// TestHTTPProxyTCPPassthrough: tls.passthrough with a tcpproxy hands the TLS connection,
// chosen by SNI, to the backend as it came: the client completes TLS with the backend's
// own certificate (which the proxy does not have), negotiates HTTP/2 with it by ALPN, and
// the backend sees a TLS request. Other hosts on the listener keep the proxy's
// certificate.
func TestHTTPProxyTCPPassthrough(t *testing.T) {
	t.Parallel()
	backendCert := testutil.SelfSigned("pass.example.com")
	webCert := testutil.SelfSigned("web.example.com")
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("tcp", "secure-app", startTLSEcho(t, "tcp", "secure-app", backendCert)) + "---\n" + backends(t, "tcp/web"),
		"secret.yaml":   tlsSecretManifestIn("tcp", "web-tls", webCert),
		"proxies.yaml": passthroughProxy + `---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: web, namespace: tcp}
spec:
  virtualhost:
    fqdn: web.example.com
    tls: {secretName: web-tls}
  routes:
  - services: [{name: web, port: 80}]
`,
	})
	for _, h2 := range []bool{false, true} {
		client := verifiedClient(e.httpsAddr(), pool(t, backendCert), h2)
		req, _ := http.NewRequest(http.MethodGet, "https://pass.example.com/through?x=1", nil)
		r, err := fetch(req, client)
		if err != nil {
			t.Fatalf("passthrough (h2 %v), verifying the backend's certificate: %v", h2, err)
		}
		wantProto := "HTTP/1.1"
		if h2 {
			wantProto = "HTTP/2.0"
		}
		if got := answeredBy(r); r.status != 200 || got != "tcp/secure-app" || !r.echo.TLS || r.echo.Proto != wantProto || r.tlsCert != "pass.example.com" || r.echo.Path != "/through" || r.echo.Host != "pass.example.com" {
			t.Errorf("passthrough (h2 %v): %d from %q, certificate %q; the backend saw %s, TLS %v, %s%s", h2, r.status, got, r.tlsCert, r.echo.Proto, r.echo.TLS, r.echo.Host, r.echo.Path)
		}
		// Nothing in between: the proxy adds no headers to what it cannot read.
		if _, ok := r.echo.Headers["X-Forwarded-For"]; ok {
			t.Errorf("passthrough: the backend saw X-Forwarded-For %v: the proxy read the encrypted request", r.echo.Headers["X-Forwarded-For"])
		}
	}
	// The same certificate is the backend's exactly.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.httpsAddr(), &tls.Config{ServerName: "pass.example.com", RootCAs: pool(t, backendCert)})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().PeerCertificates[0].Raw; !bytes.Equal(got, certDER(t, backendCert)) {
		t.Error("the passthrough host presented another certificate than the backend's")
	}
	conn.Close()

	// Another host on the same listener is terminated by the proxy.
	r, err := fetch(mustRequest(t, "https://web.example.com/"), verifiedClient(e.httpsAddr(), pool(t, webCert), false))
	if err != nil || r.status != 200 || answeredBy(r) != "tcp/web" || r.tlsCert != "web.example.com" {
		t.Errorf("https://web.example.com beside a passthrough host: %v %d from %q with %q", err, r.status, answeredBy(r), r.tlsCert)
	}
	st := proxyStatuses(t, e.dir, dag.Options{})
	wantStatus(t, st, "tcp/pass", dag.StatusValid, "")
	wantStatus(t, st, "tcp/web", dag.StatusValid, "")
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestHTTPProxyTCPTermination: a tcpproxy with tls.secretName terminates TLS with the
// proxy's certificate and sends the plain bytes to a TCP backend: an HTTP backend gets a
// plain HTTP/1.1 request, a TCP echo server gets the bytes, both ways, a megabyte
// included. A root's tcpproxy may include a team's tcpproxy in another namespace.
func TestHTTPProxyTCPTermination(t *testing.T) {
	t.Parallel()
	certs := map[string]testutil.Cert{}
	var secrets []string
	for _, host := range []string{"term.example.com", "raw.example.com", "team.example.com"} {
		certs[host] = testutil.SelfSigned(host)
		secrets = append(secrets, tlsSecretManifestIn("tcp", strings.Split(host, ".")[0]+"-tls", certs[host]))
	}
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "tcp/http-app", "team/team-app") + "---\n" + serviceManifest("tcp", "tcp-echo", startTCPEcho(t)),
		"secrets.yaml":  strings.Join(secrets, "---\n"),
		"proxies.yaml": `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: term, namespace: tcp}
spec:
  virtualhost:
    fqdn: term.example.com
    tls: {secretName: term-tls}
  tcpproxy:
    services: [{name: http-app, port: 80}]
---
` + rawTCPProxy + `---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: team, namespace: tcp}
spec:
  virtualhost:
    fqdn: team.example.com
    tls: {secretName: team-tls}
  tcpproxy:
    include: {name: tcp, namespace: team}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: tcp, namespace: team}
spec:
  tcpproxy:
    services: [{name: team-app, port: 80}]
`,
	})
	for host, from := range map[string]string{"term.example.com": "tcp/http-app", "team.example.com": "team/team-app"} {
		r, err := fetch(mustRequest(t, "https://"+host+"/plain?y=2"), verifiedClient(e.httpsAddr(), pool(t, certs[host]), false))
		if err != nil {
			t.Fatalf("https://%s, verifying the proxy's certificate: %v", host, err)
		}
		if got := answeredBy(r); r.status != 200 || got != from || r.tlsCert != host || r.echo.TLS || r.echo.Proto != "HTTP/1.1" || r.echo.Path != "/plain" || r.echo.Query != "y=2" {
			t.Errorf("https://%s: %d from %q with certificate %q; the backend saw %s, TLS %v, %s?%s", host, r.status, got, r.tlsCert, r.echo.Proto, r.echo.TLS, r.echo.Path, r.echo.Query)
		}
	}

	// Raw bytes both ways through the TCP echo server.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.httpsAddr(), &tls.Config{ServerName: "raw.example.com", RootCAs: pool(t, certs["raw.example.com"])})
	if err != nil {
		t.Fatalf("TLS to raw.example.com: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	for _, line := range []string{"hello\n", "second line\n"} {
		if _, err := io.WriteString(conn, line); err != nil {
			t.Fatal(err)
		}
		if got, err := br.ReadString('\n'); err != nil || got != line {
			t.Fatalf("TCP echo through the proxy: sent %q, got %q (%v)", line, got, err)
		}
	}
	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	werr := make(chan error, 1)
	go func() {
		_, err := conn.Write(big)
		werr <- err
	}()
	back := make([]byte, len(big))
	if _, err := io.ReadFull(br, back); err != nil {
		t.Fatalf("reading a megabyte back: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, big) {
		t.Error("a megabyte sent through the TCP proxy came back different")
	}

	st := proxyStatuses(t, e.dir, dag.Options{})
	for _, obj := range []string{"tcp/term", "tcp/raw", "tcp/team", "team/tcp"} {
		wantStatus(t, st, obj, dag.StatusValid, "")
	}
}

// accessLine waits for the access log line (text format) that has every one of attrs
// (key=value as logged) and returns it.
func (e *env) accessLine(attrs ...string) string {
	e.t.Helper()
	var found string
	e.eventually(10*time.Second, "an access log line with "+strings.Join(attrs, " "), func() bool {
	lines:
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if !strings.Contains(line, " msg=access ") {
				continue
			}
			for _, a := range attrs {
				if !strings.Contains(line, " "+a+" ") && !strings.HasSuffix(line, " "+a) {
					continue lines
				}
			}
			found = line
			return true
		}
		return false
	})
	return found
}

// TestTCPProxyAccessLogAndMetrics: TLS passthrough and terminated TLS through `portico
// run`: every connection gets an access log line (server name, Service port, upstream
// address, bytes each way, how it ended), and /metrics counts connections and bytes by
// the Service port, as Prometheus would scrape them.
func TestTCPProxyAccessLogAndMetrics(t *testing.T) {
	t.Parallel()
	backendCert, rawCert := testutil.SelfSigned("pass.example.com"), testutil.SelfSigned("raw.example.com")
	passAddr, echoAddr := startTLSEcho(t, "tcp", "secure-app", backendCert), startTCPEcho(t)
	e := start(t, map[string]string{
		"backends.yaml": serviceManifest("tcp", "secure-app", passAddr) + "---\n" + serviceManifest("tcp", "tcp-echo", echoAddr),
		"secrets.yaml":  tlsSecretManifestIn("tcp", "raw-tls", rawCert),
		"proxies.yaml":  passthroughProxy + "---\n" + rawTCPProxy,
	})
	svc := func(name string) map[string]string {
		return map[string]string{"service_namespace": "tcp", "service_name": name, "service_port": "http"}
	}
	if _, ok := metricSample(e.adminMetrics(), "portico_proxy_tcp_connections_total", svc("tcp-echo")); ok {
		t.Error("a TCP connection series before any connection")
	}

	// Passthrough: an HTTPS request whose TLS session is the backend's.
	client := verifiedClient(e.httpsAddr(), pool(t, backendCert), false)
	if r, err := fetch(mustRequest(t, "https://pass.example.com/x"), client); err != nil || r.status != 200 {
		t.Fatalf("passthrough: %v %d", err, r.status)
	}
	line := e.accessLine("proto=tcp", "server_name=pass.example.com")
	for _, want := range []string{"listener=ingress_https", "tls=passthrough", "stat_prefix=tcp_pass_example_com",
		"upstream_service=tcp/secure-app/http", "upstream_host=" + passAddr} {
		if !strings.Contains(line, " "+want) {
			t.Errorf("passthrough access line lacks %s: %s", want, line)
		}
	}
	// The HTTP exchange ends with a close by either side, whichever comes first.
	if !strings.HasSuffix(line, " termination=downstream_closed") && !strings.HasSuffix(line, " termination=upstream_closed") {
		t.Errorf("passthrough access line: want a close by either side: %s", line)
	}
	e.waitSample("portico_proxy_tcp_connections_total", svc("secure-app"), 1)
	e.waitSample("portico_proxy_tcp_active_connections", svc("secure-app"), 0)

	// Terminated: the plaintext, byte for byte, in the line and the series.
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", e.httpsAddr(), &tls.Config{ServerName: "raw.example.com", RootCAs: pool(t, rawCert)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(conn).ReadString('\n'); err != nil || got != "hello\n" {
		t.Fatalf("echo: %q %v", got, err)
	}
	e.waitSample("portico_proxy_tcp_active_connections", svc("tcp-echo"), 1)
	conn.Close()
	line = e.accessLine("proto=tcp", "server_name=raw.example.com")
	for _, want := range []string{"tls=terminated", "bytes_received=6", "bytes_sent=6", "upstream_service=tcp/tcp-echo/http", "termination=downstream_closed",
		"upstream_host=" + echoAddr, "downstream_remote_address=" + conn.LocalAddr().String()} {
		if !strings.Contains(line, " "+want) {
			t.Errorf("terminated access line lacks %s: %s", want, line)
		}
	}
	e.waitSample("portico_proxy_tcp_connections_total", svc("tcp-echo"), 1)
	e.waitSample("portico_proxy_tcp_active_connections", svc("tcp-echo"), 0)
	e.waitSample("portico_proxy_tcp_sent_bytes_total", svc("tcp-echo"), 6)
	e.waitSample("portico_proxy_tcp_received_bytes_total", svc("tcp-echo"), 6)

	// The line has the keys, in order, of the sample in docs/metrics.md.
	checkDocumentedKeys(t, "proto=tcp", line)
}
