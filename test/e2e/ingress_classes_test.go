package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// classObjects are an Ingress, an HTTPProxy and an IngressRoute of class contour, team1
// and team2 each, every one on a host of its own with a backend of its own.
func classObjects(t *testing.T) map[string]string {
	files := map[string]string{"backends.yaml": backends(t, "contour", "team1", "team2")}
	for _, class := range []string{"contour", "team1", "team2"} {
		files[class+".yaml"] = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ing-` + class + `, namespace: default}
spec:
  ingressClassName: ` + class + `
  rules:
  - host: ing-` + class + `.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: ` + class + `, port: {number: 80}}}}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: proxy-` + class + `, namespace: default, annotations: {projectcontour.io/ingress.class: ` + class + `}}
spec:
  virtualhost: {fqdn: proxy-` + class + `.test}
  routes: [{services: [{name: ` + class + `, port: 80}]}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: route-` + class + `, namespace: default, annotations: {kubernetes.io/ingress.class: ` + class + `}}
spec:
  virtualhost: {fqdn: route-` + class + `.test}
  routes: [{match: /, services: [{name: ` + class + `, port: 80}]}]
`
	}
	return files
}

// TestRunServesAListOfClasses: `portico run` with Contour's ingress.classNames
// [contour, team1] serves the Ingresses, HTTPProxies and IngressRoutes of both classes
// and not those of team2; `portico check --ingress-class-name contour,team1` says the
// same (team2's objects ignored).
func TestRunServesAListOfClasses(t *testing.T) {
	files := classObjects(t)
	r := runWithConfig(t, files, "ingress:\n  classNames: [contour, team1]\n")
	for _, kind := range []string{"ing", "proxy", "route"} {
		for _, class := range []string{"contour", "team1"} {
			host := kind + "-" + class + ".test"
			r.eventually(host+" served by "+class, func() bool {
				res := r.get(host, "/")
				return res.status == http.StatusOK && res.service() == class
			})
		}
		if res := r.get(kind+"-team2.test", "/"); res.status != http.StatusNotFound {
			t.Errorf("%s-team2.test (class team2): %d from %q, want 404", kind, res.status, res.service())
		}
	}

	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runBinary(t, portico(t), "check", dir, "-o", "json", "--ingress-class-name", "contour,team1")
	if code != 0 {
		t.Fatalf("check: exit %d\n%s\n%s", code, out, errOut)
	}
	var entries []struct{ Name, Status string }
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.Name] = e.Status
	}
	for _, kind := range []string{"ing", "proxy", "route"} {
		for class, want := range map[string]string{"contour": "valid", "team1": "valid", "team2": "ignored"} {
			if s := got[kind+"-"+class]; s != want {
				t.Errorf("check: %s-%s is %q, want %q", kind, class, s, want)
			}
		}
	}
}
