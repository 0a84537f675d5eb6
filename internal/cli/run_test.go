package cli

import (
	"flag"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/testutil"
)

// --state-file: a path is used as given; "none" or an empty value keep no state; by
// default the state goes to the user's state directory, and without one, nowhere, with
// a warning.
func TestStateFileFlag(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	resolve := func(args ...string) (string, string) {
		t.Helper()
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		value := fs.String("state-file", "", "")
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		var logs testutil.SyncBuffer
		path, err := stateFilePath(fs, *value, "manifests", slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			return "error: " + err.Error(), logs.String()
		}
		return path, logs.String()
	}
	for _, in := range []string{"manifests/state.json", "manifests/sub/.state.json", "./manifests/../manifests/x.json"} {
		if got, _ := resolve("--state-file", in); !strings.HasPrefix(got, "error: ") || !strings.Contains(got, "inside the manifests directory") {
			t.Errorf("--state-file %s: %q, want a refusal (it would be read as a manifest)", in, got)
		}
	}
	if got, _ := resolve("--state-file", "manifests-state.json"); got != "manifests-state.json" {
		t.Errorf("--state-file beside the directory: %q", got)
	}
	if got, _ := resolve("--state-file", "/var/lib/portico/state.json"); got != "/var/lib/portico/state.json" {
		t.Errorf("--state-file PATH: %q", got)
	}
	for _, off := range []string{"none", ""} {
		if got, _ := resolve("--state-file", off); got != "" {
			t.Errorf("--state-file %q: %q, want no state file", off, got)
		}
	}
	if got, _ := resolve(); !strings.HasPrefix(got, filepath.Join(state, "portico", "run", "manifests-")) {
		t.Errorf("default: %q, want under $XDG_STATE_HOME/portico/run", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "")
	if got, logs := resolve(); got != "" || !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "--state-file") {
		t.Errorf("no state directory: %q, logs %q; want none, and a warning naming --state-file", got, logs)
	}
}
