package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/source/manifest"
)

// appManifests are the rest of a real application: kinds Portico has no use for, which
// must not make `portico check` fail.
const appManifests = `apiVersion: v1
kind: ConfigMap
metadata: {name: shop-config}
data: {mode: production}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop}
spec:
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec: {containers: [{name: shop, image: shop:1}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: shop}
spec: {podSelector: {}}
`

// runCheck runs `portico check dir` and returns its stdout, stderr and exit code.
func runCheck(t *testing.T, dir string) (string, string, int) {
	t.Helper()
	return runCLI(t, "check", dir)
}

// TestCheckReportsMistakenKinds: a misspelt kind or a version Kubernetes does not serve
// in a manifest of a group Portico reads fails `portico check` with the file, the line
// and what to write instead, while real kinds Portico does not use pass quietly.
func TestCheckReportsMistakenKinds(t *testing.T) {
	good := ingressManifest("shop", "shop.localhost", []pathRule{{"Prefix", "/", "web"}}, "") + "---\n" + serviceManifest("default", "web", "127.0.0.1:9")
	tests := []struct {
		name, file, content, want string
	}{
		{"misspelt kind", "typo.yaml", "apiVersion: networking.k8s.io/v1\nkind: Ingres\nmetadata: {name: typo}\n",
			`typo.yaml:2: document 1: unknown kind "Ingres" in networking.k8s.io/v1; did you mean "Ingress"?`},
		{"unserved version", "version.yaml", "# the next API version, surely\napiVersion: networking.k8s.io/v2\nkind: Ingress\nmetadata: {name: v2}\n",
			"version.yaml:2: document 1: networking.k8s.io/v2 is not a version Kubernetes serves; Ingress is networking.k8s.io/v1"},
		{"misspelt HTTPProxy", "proxy.yaml", "apiVersion: projectcontour.io/v1\nkind: HTTPProxies\nmetadata: {name: p}\nspec: {}\n",
			`proxy.yaml:2: document 1: unknown kind "HTTPProxies" in projectcontour.io/v1; did you mean "HTTPProxy"?`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "app.yaml", good+"---\n"+appManifests)
			if out, errOut, code := runCheck(t, dir); code != 0 || errOut != "" {
				t.Fatalf("application manifests alone: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			writeFile(t, dir, tc.file, tc.content)
			out, errOut, code := runCheck(t, dir)
			if code != 1 || !strings.Contains(errOut, filepath.Join(dir, tc.want)) {
				t.Errorf("exit %d, want 1 with %q on stderr\nstdout:\n%s\nstderr:\n%s", code, tc.want, out, errOut)
			}
		})
	}
}

// TestCheckRefusesHugeFiles: a file over the size limit is refused, saying so, without
// being read.
func TestCheckRefusesHugeFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "good.yaml", ingressManifest("shop", "shop.localhost", []pathRule{{"Prefix", "/", "web"}}, "")+"---\n"+serviceManifest("default", "web", "127.0.0.1:9"))
	writeFile(t, dir, "dump.yaml", "")
	if err := os.Truncate(filepath.Join(dir, "dump.yaml"), manifest.MaxFileSize+1<<20); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCheck(t, dir)
	want := filepath.Join(dir, "dump.yaml") + ": file is 9 MiB, over the 8 MiB limit for one manifest file; split it into smaller files"
	if code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, want 1 with %q on stderr\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
}

// TestRunLogsMistakenKinds: `portico run` logs the same problems, and serves the rest.
func TestRunLogsMistakenKinds(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "web") + "---\n" + appManifests,
		"shop.yaml":     ingressManifest("shop", "shop.localhost", []pathRule{{"Prefix", "/", "web"}}, ""),
		"typo.yaml":     "apiVersion: networking.k8s.io/v1\nkind: Ingres\nmetadata: {name: typo}\n",
	})
	e.waitFor("shop.localhost", "/", "web", 200)
	e.eventually(5*time.Second, "the misspelt kind to be logged", func() bool {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, "manifest skipped") && strings.Contains(l, "typo.yaml") && strings.Contains(l, "line=2") &&
				strings.Contains(l, `did you mean \"Ingress\"?`) {
				return true
			}
		}
		return false
	})
	for _, l := range strings.Split(e.logs.String(), "\n") {
		if strings.Contains(l, "manifest skipped") && strings.Contains(l, "backends.yaml") {
			t.Errorf("kinds Portico does not use were reported: %s", l)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
