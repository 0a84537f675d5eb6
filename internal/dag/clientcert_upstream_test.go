package dag

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// --envoy-client-certificate naming a Secret that cannot be used: as in Contour, the
// HTTPProxies whose services speak TLS to their backends (protocol tls or h2, or a
// Service annotated so) are invalid, with a status naming the Secret and what to do;
// plain HTTP services never present it and stay served; an Ingress with an annotated
// backend gets a warning. A fixed Secret makes them valid again, in full and
// incremental builds alike.
func TestClientCertificateForBackendsInvalid(t *testing.T) {
	cert := testutil.SelfSigned("portico-client")
	key := nsn("infra", "client")
	opts := Options{ClientCertificate: &key}
	annotatedSvc := svc("default", "secure", "https:443")
	annotatedSvc.Annotations = map[string]string{"projectcontour.io/upstream-protocol.tls": "443"}
	objs := []runtime.Object{
		svc("default", "web", "http:80"), annotatedSvc,
		proxy(t, `
metadata: {name: tls-route}
spec:
  virtualhost: {fqdn: a.example.com}
  routes: [{services: [{name: web, port: 80, protocol: h2}, {name: web, port: 80, protocol: tls}]}]
`),
		proxy(t, `
metadata: {name: tcpproxy}
spec:
  virtualhost: {fqdn: b.example.com, tls: {passthrough: true}}
  tcpproxy: {services: [{name: secure, port: 443}]}
`),
		proxy(t, `
metadata: {name: annotated}
spec:
  virtualhost: {fqdn: c.example.com}
  routes: [{services: [{name: secure, port: 443}]}]
`),
		proxy(t, `
metadata: {name: plain}
spec:
  virtualhost: {fqdn: d.example.com}
  routes: [{services: [{name: web, port: 80}, {name: web, port: 80, protocol: h2c}]}]
`),
		ing(t, `
metadata: {name: ing}
spec:
  rules: [{host: e.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: secure, port: {number: 443}}}}]}}]`),
	}
	s := store.New()
	for _, o := range objs {
		s.Upsert(o)
	}
	inc := NewIncremental(opts)
	check := func(what string, g *Graph, usable bool) {
		t.Helper()
		if diff := cmp.Diff(Build(s, opts), g); diff != "" {
			t.Fatalf("%s: the incremental build differs from a full one (-full +incremental):\n%s", what, diff)
		}
		wantClean(t, g, "default", "plain")
		ingStatus := statusOf(g, "default", "ing")
		if usable {
			for _, name := range []string{"tls-route", "tcpproxy", "annotated"} {
				wantClean(t, g, "default", name)
			}
			if ingStatus.Status != StatusValid || ingStatus.Noted {
				t.Errorf("%s: Ingress status %+v, want valid without notes", what, ingStatus)
			}
			return
		}
		wantInvalid(t, g, "default", "tls-route", problemTLS, "SecretNotValid", "routes[0].services[0] speaks h2", "--envoy-client-certificate infra/client", "Secret infra/client not found")
		wantInvalid(t, g, "default", "tcpproxy", problemTLS, "SecretNotValid", "spec.tcpproxy.services[0] speaks tls", "infra/client")
		wantInvalid(t, g, "default", "annotated", problemTLS, "SecretNotValid", "speaks tls", "infra/client")
		if len(routesOf(g, "a.example.com")) != 0 || len(routesOf(g, "c.example.com")) != 0 {
			t.Errorf("%s: an invalid HTTPProxy's routes are served", what)
		}
		if ingStatus.Status != StatusValid || !containsAll(ingStatus.Description, "Service default/secure port 443 speaks tls to its backend", "infra/client") {
			t.Errorf("%s: Ingress status %+v, want valid with a warning naming the Secret", what, ingStatus)
		}
		if len(routesOf(g, "e.example.com")) != 1 {
			t.Errorf("%s: the Ingress's route is not served", what)
		}
	}
	check("missing", inc.Build(s), false)

	good := tlsSecret("infra", "client", cert.CertPEM, cert.KeyPEM)
	s.Upsert(good)
	check("created", inc.Build(s), true)

	broken := good.DeepCopy()
	broken.Data[corev1.TLSPrivateKeyKey] = []byte("not a key")
	s.Upsert(broken)
	g := inc.Build(s)
	wantInvalid(t, g, "default", "tls-route", problemTLS, "SecretNotValid", "Secret infra/client: invalid certificate or key")

	s.Upsert(good.DeepCopy())
	check("fixed", inc.Build(s), true)
	s.Delete(good)
	check("deleted", inc.Build(s), false)

	// The admission webhook admits them: the Secret is the installation's problem, and
	// the status says so.
	if v := ValidateObject(s.HTTPProxies[nsn("default", "tls-route")], s, opts); len(v.Problems) > 0 {
		t.Errorf("ValidateObject refuses an HTTPProxy for the client certificate: %v", v.Problems)
	}

	// Without the setting, a missing Secret of that name matters to nobody.
	wantClean(t, Build(s, Options{}), "default", "tls-route")
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
