package dag

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/testutil"
)

// With DisablePermitInsecure (Contour's disablePermitInsecure) a TLS root's routes
// that set permitInsecure are redirected to HTTPS like the others, and say why.
func TestDisablePermitInsecure(t *testing.T) {
	cert := testutil.SelfSigned("secure.example.com")
	objs := []runtime.Object{
		tlsSecret("infra", "cert", cert.CertPEM, cert.KeyPEM),
		proxy(t, `{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: secure.example.com, tls: {secretName: cert}}, routes: [{conditions: [{prefix: /open}], services: [{name: web, port: 80}], permitInsecure: true}, {services: [{name: web, port: 80}]}]}}`),
		svc("infra", "web", ":80"),
	}
	for _, c := range []struct {
		disable bool
		want    []string
	}{
		{false, []string{"Prefix /open -> infra/web/80", "Prefix / -> https"}},
		{true, []string{"Prefix /open -> https", "Prefix / -> https"}},
	} {
		g := buildWith(Options{DisablePermitInsecure: c.disable}, objs...)
		if diff := cmp.Diff(c.want, proxyHTTP(g, "secure.example.com")); diff != "" {
			t.Errorf("DisablePermitInsecure %v: HTTP routes (-want +got):\n%s", c.disable, diff)
		}
		if c.disable {
			wantWarning(t, g, "infra", "root", problemInsecure, "PermitInsecureDisabled", "spec.routes[0].permitInsecure is ignored on secure.example.com", "--disable-permit-insecure")
		} else {
			wantClean(t, g, "infra", "root")
		}
	}
}
