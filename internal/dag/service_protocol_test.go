package dag

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/testutil"
)

// annotated is Service team/backend with Contour's upstream protocol annotations.
func annotated(annotations map[string]string) runtime.Object {
	s := svc("team", "backend", "http:80", "https:443", ":8080")
	s.Annotations = annotations
	return s
}

// A Service annotated for Contour (projectcontour.io/upstream-protocol.*) gives its
// protocol to the HTTPProxy services that name none, by port number or name; the
// service's own protocol wins.
func TestHTTPProxyUpstreamProtocolAnnotation(t *testing.T) {
	for _, tc := range []struct {
		name, service string
		annotations   map[string]string
		want          string
	}{
		{"by number", `{name: backend, port: 443}`, map[string]string{"projectcontour.io/upstream-protocol.tls": "443"}, "tls"},
		{"by name, in a list", `{name: backend, port: 443}`, map[string]string{"projectcontour.io/upstream-protocol.h2": "8443, https"}, "h2"},
		{"h2c", `{name: backend, port: 80}`, map[string]string{"projectcontour.io/upstream-protocol.h2c": "80"}, "h2c"},
		{"another port", `{name: backend, port: 8080}`, map[string]string{"projectcontour.io/upstream-protocol.tls": "443,http"}, ""},
		{"the service's protocol wins", `{name: backend, port: 443, protocol: h2c}`, map[string]string{"projectcontour.io/upstream-protocol.tls": "443"}, "h2c"},
		{"no annotation", `{name: backend, port: 443}`, nil, ""},
		// Contour's precedence: the name before the number, the last protocol listing it.
		{"listed twice: tls last", `{name: backend, port: 443}`, map[string]string{
			"projectcontour.io/upstream-protocol.h2": "443", "projectcontour.io/upstream-protocol.tls": "443"}, "tls"},
		{"name before number", `{name: backend, port: 443}`, map[string]string{
			"projectcontour.io/upstream-protocol.h2": "443", "projectcontour.io/upstream-protocol.tls": "https"}, "tls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := build(annotated(tc.annotations), policyRoot(t, `{services: [`+tc.service+`]}`))
			wantProxy(t, g, "team", "root", StatusValid)
			routes := routesOfHost(t, g, "p.example.com")
			if got := routes[0].Clusters[0].Cluster.Protocol; got != tc.want {
				t.Errorf("protocol %q, want %q", got, tc.want)
			}
		})
	}
}

// validation without a protocol of its own verifies the certificate of a Service port
// annotated for TLS (Contour's upstream TLS guide); a Service whose port is not
// annotated makes the object invalid, and the admission webhook, which cannot see the
// Service, admits it.
func TestHTTPProxyValidationFromAnnotation(t *testing.T) {
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ca"},
		Data: map[string][]byte{"ca.crt": testutil.SelfSigned("backend.example.com").CertPEM}}
	root := policyRoot(t, `{services: [{name: backend, port: 443, validation: {caSecret: ca, subjectName: backend.example.com}}]}`)
	g := build(ca, root, annotated(map[string]string{"projectcontour.io/upstream-protocol.tls": "443"}))
	wantProxy(t, g, "team", "root", StatusValid)
	c := routesOfHost(t, g, "p.example.com")[0].Clusters[0].Cluster
	if c.Protocol != "tls" || c.UpstreamValidation == nil || c.UpstreamValidation.CAName != "team/ca" {
		t.Errorf("cluster protocol %q, validation %+v; want tls verified with team/ca", c.Protocol, c.UpstreamValidation)
	}

	g = build(ca, root, annotated(nil))
	wantInvalid(t, g, "team", "root", problemService, "ValidationInvalid", "validation needs protocol tls or h2", `projectcontour.io/upstream-protocol.tls: "443"`)

	if v := ValidateObject(root, nil, Options{}); len(v.Problems) > 0 {
		t.Errorf("ValidateObject: %v, want none (the Service decides)", v.Problems)
	}
}
