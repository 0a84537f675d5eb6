package app

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/status"
)

// TestCheckReportsIngressRoutes: `portico check` reports IngressRoutes, decoded from
// manifests, under kind "IngressRoute" in its JSON output.
func TestCheckReportsIngressRoutes(t *testing.T) {
	dir := t.TempDir()
	const manifests = `apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: web}
spec:
  virtualhost: {fqdn: web.example.com}
  routes:
  - match: /
    delegate: {name: app}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: app, namespace: web}
spec:
  routes:
  - match: /
    service: {name: app, port: 80}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: stray}
spec:
  routes:
  - match: /
    services: [{name: app, port: 80}]
`
	if err := os.WriteFile(filepath.Join(dir, "routes.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Check(dir, dag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 0 || res.TranslateErr != nil {
		t.Fatalf("problems %v, translation error %v", res.Problems, res.TranslateErr)
	}
	var out bytes.Buffer
	if err := status.WriteJSON(&out, res.Statuses); err != nil {
		t.Fatal(err)
	}
	var entries []status.Entry
	if err := json.Unmarshal(out.Bytes(), &entries); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		if e.Kind == dag.KindIngressRoute {
			got[e.Namespace+"/"+e.Name] = e.Status
		}
	}
	want := map[string]string{"web/root": "valid", "web/app": "valid", "default/stray": "orphaned"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: status %q, want %q (all: %s)", k, got[k], v, out.String())
		}
	}
}
