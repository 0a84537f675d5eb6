package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testutil"
)

// TestHTTPProxyHTTPVersions: spec.httpVersions limits what a root's HTTPS clients may
// speak. HTTP/1.1 only: an HTTP/2 client is served over HTTP/1.1. HTTP/2 only: an
// HTTP/1.1 client gets no answer. A host without it serves both.
func TestHTTPProxyHTTPVersions(t *testing.T) {
	t.Parallel()
	var docs []string
	docs = append(docs, backends(t, "ver/app"))
	for _, h := range []string{"one", "two", "both"} {
		docs = append(docs, tlsSecretManifestIn("ver", h, testutil.SelfSigned(h+".example.com")))
	}
	proxy := func(name, versions string) string {
		return `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ` + name + `, namespace: ver}
spec:
  virtualhost: {fqdn: ` + name + `.example.com, tls: {secretName: ` + name + `}}` + versions + `
  routes: [{services: [{name: app, port: 80}]}]
`
	}
	e := start(t, map[string]string{
		"backends.yaml": strings.Join(docs, "---\n"),
		"proxies.yaml": proxy("one", "\n  httpVersions: [HTTP/1.1]") + "---\n" + proxy("two", "\n  httpVersions: [HTTP/2]") +
			"---\n" + proxy("both", ""),
	})
	e.eventually(20*time.Second, "the hosts served", func() bool {
		r, err := e.getTLSE("both.example.com", "/")
		return err == nil && r.service() == "app"
	})
	if r := e.getTLS("one.example.com", "/", true); r.service() != "app" || r.proto != "HTTP/1.1" {
		t.Errorf("HTTP/1.1 only, an HTTP/2 client: %s from %q, want HTTP/1.1 from app", r.proto, r.service())
	}
	if r := e.getTLS("two.example.com", "/", true); r.service() != "app" || r.proto != "HTTP/2.0" {
		t.Errorf("HTTP/2 only, an HTTP/2 client: %s from %q, want HTTP/2.0 from app", r.proto, r.service())
	}
	if r, err := e.getTLSE("two.example.com", "/"); err == nil {
		t.Errorf("HTTP/2 only, an HTTP/1.1 client: answered %d (%s), want no answer", r.status, r.proto)
	}
	if r := e.getTLS("both.example.com", "/", true); r.proto != "HTTP/2.0" {
		t.Errorf("both versions, an HTTP/2 client: %s", r.proto)
	}
}
