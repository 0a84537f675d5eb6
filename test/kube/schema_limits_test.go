package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/kubetest"
)

// TestHTTPProxyCRDSchemaAgreesWithDag: a sample of the limits the HTTPProxy CRD's schema
// sets (an enum, a pattern, a length, a list size, a minimum, the subjectNames rule) is
// enforced by a real API server with the CRDs of deploy/crds, and each object it
// refuses Portico's own validation (what `portico run`, `portico check` and the webhook
// use) refuses too, so a directory behaves as the cluster would.
func TestHTTPProxyCRDSchemaAgreesWithDag(t *testing.T) {
	cfg := env.AdminConfig(t)
	env.InstallContourCRDs(t)
	c := kubetest.Clientset(t, cfg)
	cc := kubetest.ContourClient(t, cfg)
	ctx := context.Background()
	const ns = "schema-limits"
	createNamespace(t, c, ns)
	routeWith := func(fields string) string {
		return `{"virtualhost": {"fqdn": "limits.test"}, "routes": [{"services": [{"name": "s", "port": 80}], ` + fields + `}]}`
	}
	serviceWith := func(fields string) string {
		return `{"virtualhost": {"fqdn": "limits.test"}, "routes": [{"services": [{"name": "s", "port": 443, ` + fields + `}]}]}`
	}
	for _, tc := range []struct {
		name, spec string
		field      string // what the API server's refusal names
	}{
		{"samesite", routeWith(`"cookieRewritePolicies": [{"name": "a", "sameSite": "lax"}]`), "sameSite"},
		{"cookie-domain", routeWith(`"cookieRewritePolicies": [{"name": "a", "domainRewrite": {"value": "Example.com"}}]`), "domainRewrite.value"},
		{"cookie-name", routeWith(`"cookieRewritePolicies": [{"name": "` + strings.Repeat("a", 4097) + `", "secure": true}]`), "name"},
		{"cross-scheme", routeWith(`"internalRedirectPolicy": {"allowCrossSchemeRedirect": "always"}`), "allowCrossSchemeRedirect"},
		{"retry-count", routeWith(`"retryPolicy": {"count": -2}`), "count"},
		{"header-value", routeWith(`"requestHeadersPolicy": {"set": [{"name": "x-a", "value": ""}]}`), "value"},
		{"subject-names", serviceWith(`"protocol": "tls", "validation": {"caSecret": "ca", "subjectName": "a.test", "subjectNames": ["b.test"]}`), "subjectNames[0] must equal subjectName"},
		{"subject-names-9", serviceWith(`"protocol": "tls", "validation": {"caSecret": "ca", "subjectName": "a", "subjectNames": ["a","b","c","d","e","f","g","h","i"]}`), "subjectNames"},
		{"no-subject-name", serviceWith(`"protocol": "tls", "validation": {"caSecret": "ca", "subjectNames": ["b.test"]}`), "subjectName"},
		{"protocol-empty", serviceWith(`"protocol": ""`), "protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := createHTTPProxyJSON(ctx, cc, ns, tc.name, tc.spec)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("API server: %v, want a refusal naming %q", err, tc.field)
			}
			var p contourv1.HTTPProxy
			if err := json.Unmarshal([]byte(`{"metadata": {"name": "`+tc.name+`", "namespace": "`+ns+`"}, "spec": `+tc.spec+`}`), &p); err != nil {
				t.Fatal(err)
			}
			if v := dag.ValidateObject(&p, nil, dag.Options{}); len(v.Problems) == 0 {
				t.Errorf("the API server refuses it, Portico's validation does not (notes %q)", v.Notes)
			}
		})
	}
}
