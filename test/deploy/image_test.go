package deploy

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// porticoImage is the repository Portico's images are published to.
const porticoImage = "ghcr.io/portico-dev/portico"

// TestImageTagIsTheVersion: every container of deploy/ that runs Portico pins the
// image tag of this source tree's version (internal/version/VERSION, which the binary
// reports and hack/image tags with), so `kubectl apply -k deploy/` installs the release
// the manifests were written for, never a moving tag such as latest. It needs no API
// server, so it runs under -short too.
func TestImageTagIsTheVersion(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "internal", "version", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	want := porticoImage + ":" + strings.TrimSpace(string(data))

	var files []string
	for _, m := range loadManifests(t) {
		for _, ref := range images(m.Obj.Object) {
			repo, _, _ := strings.Cut(ref, "@")
			if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
				repo = repo[:i]
			}
			if repo != porticoImage {
				continue
			}
			files = append(files, m.File)
			if ref != want {
				t.Errorf("%v: image %s, want %s (the VERSION file's tag)", m, ref, want)
			}
		}
	}
	// The controller and the Envoy bootstrap init container both run Portico: a test
	// that finds neither would prove nothing.
	for _, f := range []string{"portico.yaml", "envoy.yaml"} {
		if !slices.Contains(files, f) {
			t.Errorf("deploy/%s: no container runs %s", f, porticoImage)
		}
	}
}

// images returns every string value of a field named "image" anywhere in v (containers,
// init containers, ephemeral containers, of any workload kind).
func images(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "image" {
				out = append(out, s)
				continue
			}
			out = append(out, images(e)...)
		}
	case []any:
		for _, e := range v {
			out = append(out, images(e)...)
		}
	}
	return out
}
