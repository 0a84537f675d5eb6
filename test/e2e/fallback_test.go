package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/testutil"
)

// getNoSNI sends GET https://host/path over a TLS connection that names no server
// (an IP address as the URL's host sends no SNI), returning the certificate's
// CommonName in result.tlsCert.
func (e *env) getNoSNI(host, path string) (result, error) {
	addr := e.httpsAddr()
	tr := &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // self-signed test certificates
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	return fetch(req, &http.Client{Transport: tr, Timeout: 10 * time.Second})
}

// TestHTTPProxyFallbackCertificate: a client that sends no server name gets the
// fallback certificate (--fallback-certificate) and reaches, by its Host header, the
// roots that enable it (tls.enableFallbackCertificate), and only those; clients that
// name a host still get the host's own certificate.
func TestHTTPProxyFallbackCertificate(t *testing.T) {
	t.Parallel()
	docs := []string{backends(t, "fb/app"),
		tlsSecretManifestIn("fb", "fallback", testutil.SelfSigned("fallback.example.com")),
		tlsSecretManifestIn("fb", "legacy", testutil.SelfSigned("legacy.example.com")),
		tlsSecretManifestIn("fb", "modern", testutil.SelfSigned("modern.example.com"))}
	proxy := func(name, extra string) string {
		return `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ` + name + `, namespace: fb}
spec:
  virtualhost: {fqdn: ` + name + `.example.com, tls: {secretName: ` + name + extra + `}}
  routes: [{services: [{name: app, port: 80}]}]
`
	}
	e := startWith(t, map[string]string{
		"backends.yaml": strings.Join(docs, "---\n"),
		"proxies.yaml":  proxy("legacy", ", enableFallbackCertificate: true") + "---\n" + proxy("modern", ""),
	}, app.RunOptions{FallbackCertificate: &types.NamespacedName{Namespace: "fb", Name: "fallback"}})
	e.eventually(20*time.Second, "legacy.example.com served without SNI", func() bool {
		r, err := e.getNoSNI("legacy.example.com", "/")
		return err == nil && r.service() == "app"
	})
	r, _ := e.getNoSNI("legacy.example.com", "/")
	if r.tlsCert != "fallback.example.com" {
		t.Errorf("without SNI the certificate is %q, want the fallback", r.tlsCert)
	}
	if r, err := e.getNoSNI("modern.example.com", "/"); err != nil || r.status != http.StatusNotFound {
		t.Errorf("modern.example.com (no fallback) without SNI: %v %d, want 404", err, r.status)
	}
	if r := e.getTLS("legacy.example.com", "/", false); r.tlsCert != "legacy.example.com" || r.service() != "app" {
		t.Errorf("with SNI legacy.example.com: certificate %q, %q; want its own", r.tlsCert, r.service())
	}
}

// Without --fallback-certificate, a root that enables it is not served, and says why.
func TestHTTPProxyFallbackCertificateMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "proxy.yaml", tlsSecretManifestIn("fb", "legacy", testutil.SelfSigned("legacy.example.com"))+`---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: legacy, namespace: fb}
spec:
  virtualhost: {fqdn: legacy.example.com, tls: {secretName: legacy, enableFallbackCertificate: true}}
  routes: [{services: [{name: app, port: 80}]}]
`)
	out, _, code := runCheck(t, dir)
	if code == 0 || !strings.Contains(out, "--fallback-certificate") {
		t.Errorf("check exited %d:\n%s\nwant a failure naming --fallback-certificate", code, out)
	}
	out, _, code = runCLI(t, "check", "--fallback-certificate", "fb/legacy", dir)
	if strings.Contains(out, "FallbackNotPresent") || strings.Contains(out, "--fallback-certificate") {
		t.Errorf("check --fallback-certificate still complains (exit %d):\n%s", code, out)
	}
}
