package e2e

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// `portico run --use-proxy-protocol`, as behind a TCP load balancer that sends the
// PROXY protocol: the client's address is the one the header names, for the backend's
// X-Forwarded-For, for IP filters on the peer and for dynamic header values; a
// connection without a header is closed; HTTPS is served with SNI after the header.

const proxyProtocolProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: pp, namespace: default}
spec:
  virtualhost:
    fqdn: pp.example.com
    tls: {secretName: pp}
  routes:
  - services: [{name: web, port: 80}]
    permitInsecure: true
    requestHeadersPolicy:
      set: [{name: X-Client, value: "%DOWNSTREAM_REMOTE_ADDRESS%"}]
  - conditions: [{prefix: /deny}]
    permitInsecure: true
    ipDenyPolicy: [{source: Peer, cidr: 203.0.113.7/32}]
    services: [{name: web, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: pass, namespace: default}
spec:
  virtualhost:
    fqdn: pass.example.com
    tls: {passthrough: true}
  tcpproxy:
    services: [{name: secure-app, port: 80}]
`

// proxyV1 is a version 1 header from src to the proxy's port 80.
func proxyV1(src netip.AddrPort) []byte {
	return fmt.Appendf(nil, "PROXY TCP4 %s 10.0.0.1 %d 80\r\n", src.Addr(), src.Port())
}

// proxyV2 is a version 2 PROXY header over TCP/IPv4 from src, with a TLV (ALPN) that
// the proxy skips.
func proxyV2(src netip.AddrPort) []byte {
	b := []byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x00")
	a := src.Addr().As4()
	b = append(b, a[:]...)
	b = append(b, 10, 0, 0, 1)
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, 443)
	b = append(b, 0x01, 0x00, 0x02, 'h', '2')
	binary.BigEndian.PutUint16(b[14:16], uint16(len(b)-16))
	return b
}

// headerDialer dials addr and writes header first, as a load balancer does.
func headerDialer(addr string, header []byte) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if _, err := c.Write(header); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
}

func TestRunUseProxyProtocol(t *testing.T) {
	cert, backendCert := testutil.SelfSigned("pp.example.com"), testutil.SelfSigned("pass.example.com")
	e := startWith(t, map[string]string{
		"web.yaml":    backends(t, "web") + "---\n" + serviceManifest("default", "secure-app", startTLSEcho(t, "default", "secure-app", backendCert)),
		"secret.yaml": tlsSecretManifest("pp", cert),
		"pp.yaml":     proxyProtocolProxy,
	}, app.RunOptions{Global: translate.Global{UseProxyProtocol: true}})

	denied, client := netip.MustParseAddrPort("203.0.113.7:51000"), netip.MustParseAddrPort("198.51.100.9:40000")
	get := func(path string, header []byte) (result, error) {
		req, err := http.NewRequest(http.MethodGet, "http://pp.example.com"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{DisableKeepAlives: true, DialContext: headerDialer(e.httpAddr(), header)}
		defer tr.CloseIdleConnections()
		return fetch(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
	}
	e.eventually(5*time.Second, "pp.example.com to be served", func() bool {
		r, err := get("/", proxyV1(client))
		return err == nil && r.service() == "web"
	})

	for _, tc := range []struct {
		name   string
		header []byte
		src    netip.AddrPort
	}{{"v1", proxyV1(client), client}, {"v2", proxyV2(client), client}} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := get("/", tc.header)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.echo.Headers["X-Forwarded-For"]; r.service() != "web" || len(got) != 1 || got[0] != tc.src.Addr().String() {
				t.Errorf("%d from %q, X-Forwarded-For %q; want web with the header's source %s", r.status, r.service(), got, tc.src.Addr())
			}
			if got := r.echo.Headers["X-Client"]; len(got) != 1 || got[0] != tc.src.String() {
				t.Errorf("%%DOWNSTREAM_REMOTE_ADDRESS%% = %q, want %s", got, tc.src)
			}
		})
	}

	t.Run("IP deny list on the header's source", func(t *testing.T) {
		for _, header := range [][]byte{proxyV1(denied), proxyV2(denied)} {
			if r, err := get("/deny", header); err != nil || r.status != http.StatusForbidden || r.service() != "" {
				t.Errorf("%q from the denied address: %d from %q (%v), want 403 from the proxy", header[:12], r.status, r.service(), err)
			}
		}
		if r, err := get("/deny", proxyV2(client)); err != nil || r.service() != "web" {
			t.Errorf("another address: %d from %q (%v), want web", r.status, r.service(), err)
		}
	})

	t.Run("no header: closed", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.httpAddr()+"/", nil)
		req.Host = "pp.example.com"
		if r, err := fetch(req, e.client); err == nil {
			t.Errorf("a request without a PROXY header got %d from %q, want the connection closed", r.status, r.service())
		}
		if r, err := get("/", []byte("PROXY TCP4 not-an-address 10.0.0.1 1 80\r\n")); err == nil {
			t.Errorf("a malformed header got %d from %q, want the connection closed", r.status, r.service())
		}
	})

	// The HTTPS listener has a TCP proxy chain (TLS passthrough): every connection's
	// ClientHello is read after its header, before any chain takes it.
	t.Run("HTTPS with SNI after the header", func(t *testing.T) {
		for _, h2 := range []bool{false, true} {
			tr := &http.Transport{
				DisableKeepAlives: true,
				TLSClientConfig:   &tls.Config{ServerName: "pp.example.com", InsecureSkipVerify: true}, // self-signed
				DialContext:       headerDialer(e.httpsAddr(), proxyV2(client)),
				ForceAttemptHTTP2: h2,
			}
			req, _ := http.NewRequest(http.MethodGet, "https://pp.example.com/", nil)
			r, err := fetch(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
			tr.CloseIdleConnections()
			if err != nil {
				t.Fatalf("h2=%v: %v", h2, err)
			}
			if got := r.echo.Headers["X-Forwarded-For"]; r.service() != "web" || r.tlsCert != "pp.example.com" || len(got) != 1 || got[0] != client.Addr().String() {
				t.Errorf("h2=%v: %d from %q, certificate %q, X-Forwarded-For %q", h2, r.status, r.service(), r.tlsCert, got)
			}
		}
		pass := &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{ServerName: "pass.example.com", RootCAs: pool(t, backendCert)},
			DialContext:       headerDialer(e.httpsAddr(), proxyV1(client)),
		}
		req, _ := http.NewRequest(http.MethodGet, "https://pass.example.com/", nil)
		r, err := fetch(req, &http.Client{Transport: pass, Timeout: 10 * time.Second})
		pass.CloseIdleConnections()
		if err != nil || r.service() != "secure-app" || r.tlsCert != "pass.example.com" {
			t.Errorf("TLS passthrough after a v1 header: %d from %q, certificate %q (%v); want the backend's", r.status, r.service(), r.tlsCert, err)
		}
		req, _ = http.NewRequest(http.MethodGet, "https://pp.example.com/", nil)
		tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "pp.example.com", InsecureSkipVerify: true},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, e.httpsAddr())
			}}
		defer tr.CloseIdleConnections()
		if _, err := fetch(req, &http.Client{Transport: tr, Timeout: 10 * time.Second}); err == nil {
			t.Error("a TLS handshake without a PROXY header succeeded")
		}
	})
}
