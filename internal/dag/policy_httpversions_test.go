package dag

import (
	"testing"

	"github.com/portico-dev/portico/internal/testutil"
)

// spec.httpVersions reaches the root's HTTPS host; without TLS, or on an included
// object, it cannot choose anything and says so.
func TestHTTPProxyHTTPVersions(t *testing.T) {
	cert := testutil.SelfSigned("v.example.com")
	doc := func(vh, versions string) *Graph {
		return build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: v.example.com`+vh+`}
  httpVersions: `+versions+`
  routes: [{services: [{name: web, port: 80}]}]
`), svc("default", "web", "http:80"), tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM))
	}
	g := doc(", tls: {secretName: cert}", "[HTTP/1.1]")
	wantClean(t, g, "default", "root")
	if svh := g.HTTPS[0]; len(svh.HTTPVersions) != 1 || svh.HTTPVersions[0] != HTTP1 {
		t.Fatalf("HTTPVersions = %v", svh.HTTPVersions)
	}
	if g := doc(", tls: {secretName: cert}", "[HTTP/2, HTTP/1.1]"); g.HTTPS[0].HTTPVersions != nil {
		t.Errorf("both versions: %v, want nil (the default)", g.HTTPS[0].HTTPVersions)
	}
	wantWarning(t, doc("", "[HTTP/2]"), "default", "root", problemSpec, "HTTPVersionsIgnored", "ignored without TLS termination")
	wantInvalid(t, doc(", tls: {secretName: cert}", "[HTTP/3]"), "default", "root", problemSpec, "HTTPVersionInvalid", `spec.httpVersions[0] "HTTP/3"`)
}
