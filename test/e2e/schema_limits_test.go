package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckRefusesWhatContoursSchemaRefuses: `portico check` on a directory refuses the
// values the HTTPProxy CRD's schema would refuse in a cluster (a cookie domain in
// capitals, subjectNames not led by subjectName, a header set to nothing, a retry count
// below -1), each in the object's description, and keeps a valid neighbour valid.
func TestCheckRefusesWhatContoursSchemaRefuses(t *testing.T) {
	bin := portico(t)
	dir := t.TempDir()
	manifests := `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: strict, namespace: default}
spec:
  virtualhost: {fqdn: strict.test}
  routes:
    - conditions: [{prefix: /cookies}]
      services: [{name: s, port: 80}]
      cookieRewritePolicies: [{name: session, domainRewrite: {value: Strict.Test}}]
    - conditions: [{prefix: /tls}]
      services: [{name: s, port: 443, protocol: tls, validation: {caSecret: ca, subjectName: s.default, subjectNames: [other.default]}}]
    - conditions: [{prefix: /headers}]
      services: [{name: s, port: 80}]
      requestHeadersPolicy: {set: [{name: X-Team, value: ""}]}
    - conditions: [{prefix: /retries}]
      services: [{name: s, port: 80}]
      retryPolicy: {count: -3}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: fine, namespace: default}
spec:
  virtualhost: {fqdn: fine.test}
  routes:
    - services: [{name: s, port: 80}]
      cookieRewritePolicies: [{name: session, domainRewrite: {value: fine.test}}]
      retryPolicy: {count: -1}
---
apiVersion: v1
kind: Service
metadata: {name: s, namespace: default}
spec: {ports: [{name: http, port: 80}, {name: https, port: 443}]}
`
	if err := os.WriteFile(filepath.Join(dir, "proxies.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runBinary(t, bin, "check", dir, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (an invalid object)\n%s\n%s", code, out, errOut)
	}
	var entries []map[string]any
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("stdout is not one JSON array: %v\n%s", err, out)
	}
	got := map[string]map[string]any{}
	for _, e := range entries {
		got[e["name"].(string)] = e
	}
	if got["fine"]["status"] != "valid" {
		t.Errorf("fine: %v, want valid", got["fine"])
	}
	strict := got["strict"]
	if strict["status"] != "invalid" {
		t.Fatalf("strict: %v, want invalid", strict)
	}
	for _, want := range []string{
		`spec.routes[0].cookieRewritePolicies[0].domainRewrite.value "Strict.Test" must be a domain name in lower case`,
		`spec.routes[1].services[0].validation.subjectNames[0] "other.default" must equal subjectName "s.default"`,
		`spec.routes[2].requestHeadersPolicy.set[0].value is empty`,
		`spec.routes[3].retryPolicy.count -3 must be -1 (no retries) or more`,
	} {
		if d, _ := strict["description"].(string); !strings.Contains(d, want) {
			t.Errorf("strict's description %q does not say %q", strict["description"], want)
		}
	}
}
