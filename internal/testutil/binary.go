package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// binary caches one build of cmd/portico per test process.
type binary struct {
	once sync.Once
	path string
	err  error
}

var portico binary // written once, by the first caller, under once

// PorticoBinary builds cmd/portico once per test process and returns its path.
func PorticoBinary(t testing.TB) string {
	t.Helper()
	portico.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "portico-bin")
		if err != nil {
			portico.err = err
			return
		}
		portico.path = filepath.Join(dir, "portico")
		cmd := exec.Command("go", "build", "-o", portico.path, "./cmd/portico")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			portico.err = fmt.Errorf("go build ./cmd/portico: %v\n%s", err, out)
		}
	})
	if portico.err != nil {
		t.Fatal(portico.err)
	}
	return portico.path
}

// RemovePorticoBinary deletes the build PorticoBinary made, if any. A TestMain calls it
// after m.Run: each build is over 100 MB, and CI runs several test processes per clone.
func RemovePorticoBinary() {
	if portico.path != "" {
		_ = os.RemoveAll(filepath.Dir(portico.path))
	}
}
