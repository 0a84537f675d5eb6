//go:build unix

package manifest

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A named pipe called *.yaml must be reported, not read (reading would block).
func TestLoadDirSkipsNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1)})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	res, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Service default/a"}, names(res.Objects)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	want := []Problem{{File: filepath.Join(dir, "pipe.yaml"), Reason: "not a regular file"}}
	if diff := cmp.Diff(want, res.Problems); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
