package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

func svcYAML(name string, port int) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: %s\nspec:\n  ports:\n  - port: %d\n", name, port)
}

func svcJSON(name string, port int) string {
	return fmt.Sprintf(`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": %q}, "spec": {"ports": [{"port": %d}]}}`, name, port)
}

// writeFiles creates files (path relative to dir → content), with parents.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// names lists "Kind namespace/name" of objects, in order.
func names(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		acc, err := meta.Accessor(o)
		if err != nil {
			out = append(out, fmt.Sprintf("%T", o))
			continue
		}
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+" "+acc.GetNamespace()+"/"+acc.GetName())
	}
	return out
}

func TestLoadDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	writeFiles(t, dir, map[string]string{
		"b.yaml":                svcYAML("b", 1) + "---\n" + svcYAML("b2", 2),
		"a/z.yml":               svcYAML("az", 3),
		"a/deeper/more/x.json":  svcJSON("ax", 4),
		"c.YAML":                svcYAML("c", 5),
		"d.json":                `{"apiVersion": "v1", "kind": "List", "items": [` + svcJSON("d1", 6) + "," + svcJSON("d2", 7) + "]}",
		"e.yaml":                "apiVersion: v1\nkind: Service\nmetadata:\n  name: e\nspec:\n  prots: []\n",
		"f.yaml":                svcYAML("b", 9), // duplicate of b.yaml's first document
		"notes.txt":             svcYAML("txt", 1),
		"README.md":             "# manifests",
		".git/config.yaml":      svcYAML("git", 1),
		".hidden.yaml":          svcYAML("hidden", 1),
		".hiddendir/h.yaml":     svcYAML("hiddendir", 1),
		"b.yaml~":               svcYAML("backup", 1),
		".#b.yaml":              svcYAML("lock", 1),
		".b.yaml.swp":           "\x00binary",
		"b.yaml.swp":            svcYAML("swp", 1),
		"#b.yaml#":              svcYAML("autosave", 1),
		"..2024_01_01/cm.yaml":  svcYAML("configmap", 10),
		"empty/nothing-here.md": "",
	})
	// ConfigMap-volume style: a symbolic link to a file in a hidden
	// directory is read; a symbolic link to a directory is not followed.
	if err := os.Symlink(filepath.Join("..2024_01_01", "cm.yaml"), filepath.Join(dir, "cm.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "linked-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("does-not-exist.yaml", filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}

	res, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Service default/ax", // a/deeper/more/x.json
		"Service default/az", // a/z.yml
		"Service default/b",  // b.yaml
		"Service default/b2",
		"Service default/c",         // c.YAML
		"Service default/configmap", // cm.yaml -> ..2024_01_01/cm.yaml
		"Service default/d1",        // d.json
		"Service default/d2",
	}
	if diff := cmp.Diff(want, names(res.Objects)); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	wantProbs := []Problem{
		{File: filepath.Join(dir, "dangling.yaml"), Reason: "cannot read: stat " + filepath.Join(dir, "dangling.yaml") + ": no such file or directory"},
		{File: filepath.Join(dir, "e.yaml"), Line: 6, Document: 1, Reason: `unknown field "spec.prots"`},
		{File: filepath.Join(dir, "f.yaml"), Line: 1, Document: 1, Reason: "Service default/b is already defined at " + filepath.Join(dir, "b.yaml") + ":1 (document 1); this definition is ignored"},
	}
	if diff := cmp.Diff(wantProbs, res.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestLoadDirPathsAsGiven(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"m/sub/bad.yaml": "kind: Service\n"})
	t.Chdir(root)
	res, err := LoadDir("m")
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{{File: filepath.Join("m", "sub", "bad.yaml"), Line: 1, Document: 1, Reason: `apiVersion is missing (kind "Service")`}}
	if diff := cmp.Diff(want, res.Problems); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLoadDirErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadDir of a missing directory: no error")
	}
	file := filepath.Join(dir, "file.yaml")
	writeFiles(t, dir, map[string]string{"file.yaml": svcYAML("a", 1)})
	if _, err := LoadDir(file); err == nil {
		t.Error("LoadDir of a file: no error")
	}
	res, err := LoadDir(dir)
	if err != nil || len(res.Objects) != 1 || len(res.Problems) != 0 {
		t.Errorf("LoadDir = %v, %v", res, err)
	}
}

func TestLoadDirUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can read anything")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1), "locked/b.yaml": svcYAML("b", 2), "c.yaml": svcYAML("c", 3)})
	if err := os.Chmod(filepath.Join(dir, "a.yaml"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "locked"), 0o755) })
	res, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Service default/c"}, names(res.Objects)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(res.Problems) != 2 {
		t.Errorf("want 2 problems, got %v", res.Problems)
	}
}

// A file over MaxFileSize is refused without being read, and the rest still loads.
func TestLoadDirRefusesHugeFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1), "huge.yaml": svcYAML("huge", 1), "limit.yaml": ""})
	// Sparse files: large without writing (or reading, if the limit works) the data.
	must(t, os.Truncate(filepath.Join(dir, "huge.yaml"), 3<<30))
	must(t, os.Truncate(filepath.Join(dir, "limit.yaml"), MaxFileSize))
	res, err := LoadDir(dir)
	must(t, err)
	if diff := cmp.Diff([]string{"Service default/a"}, names(res.Objects)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(res.Problems) != 2 {
		t.Fatalf("want 2 problems, got %v", res.Problems)
	}
	want := Problem{File: filepath.Join(dir, "huge.yaml"), Reason: "file is 3072 MiB, over the 8 MiB limit for one manifest file; split it into smaller files"}
	if diff := cmp.Diff(want, res.Problems[0]); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A file of exactly the limit is read (and, being all zero bytes, is not YAML).
	if p := res.Problems[1]; p.File != filepath.Join(dir, "limit.yaml") || strings.Contains(p.Reason, "limit") {
		t.Errorf("file at the limit: %s", p)
	}
}

func TestSizeString(t *testing.T) {
	for n, want := range map[int64]string{900: "900 bytes", 8 << 20: "8 MiB", 8<<20 + 1<<19: "8.5 MiB"} {
		if got := sizeString(n); got != want {
			t.Errorf("sizeString(%d) = %q, want %q", n, got, want)
		}
	}
}
