package version

import (
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The VERSION file is what images are tagged with and deploy/ pins: one line, a
// semantic version with a leading v.
func TestVersionFile(t *testing.T) {
	data, err := os.ReadFile("VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?\n?$`).Match(data) {
		t.Fatalf("VERSION is %q, want one line like v1.2.3 (or v1.2.3-rc.1)", data)
	}
	if got, want := Version(), strings.TrimSpace(string(data)); got != want {
		t.Errorf("Version() = %q, want the VERSION file's %q", got, want)
	}
	if got := Get().Version; got != Version() {
		t.Errorf("Get().Version = %q, want %q", got, Version())
	}
}

func TestFromBuildInfo(t *testing.T) {
	v := Version()
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "7712e9304079c95007ab1eb45fbdc3c1a7b1a9a0"
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{"no build info", nil, Info{v, Unknown, runtime.Version()}},
		{"built outside a repository", &debug.BuildInfo{GoVersion: "go1.26.1", Settings: settings("-trimpath", "true", "CGO_ENABLED", "0")},
			Info{v, Unknown, "go1.26.1"}},
		{"clean work tree", &debug.BuildInfo{GoVersion: "go1.26.1", Settings: settings("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-01-02T03:04:05Z", "vcs.modified", "false")},
			Info{v, rev, "go1.26.1"}},
		{"uncommitted changes", &debug.BuildInfo{GoVersion: "go1.26.1", Settings: settings("vcs.revision", rev, "vcs.modified", "true")},
			Info{v, rev + "-dirty", "go1.26.1"}},
		{"modified without a revision", &debug.BuildInfo{GoVersion: "go1.26.1", Settings: settings("vcs.modified", "true")},
			Info{v, Unknown, "go1.26.1"}},
		{"no Go version recorded", &debug.BuildInfo{Settings: settings("vcs.revision", rev)},
			Info{v, rev, runtime.Version()}},
		// go install github.com/portico-dev/portico/cmd/portico@COMMIT records no VCS
		// settings, and the commit in the module's pseudo-version.
		{"installed at a commit", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/portico-dev/portico", Version: "v0.7.1-0.20261127123456-7712e9304079"}},
			Info{v, "7712e9304079", "go1.26.1"}},
		{"installed at a commit after a pre-release", &debug.BuildInfo{Main: debug.Module{Version: "v0.8.0-rc.1.0.20261127123456-7712e9304079"}},
			Info{v, "7712e9304079", runtime.Version()}},
		{"pseudo-version of a modified tree", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261127123456-7712e9304079+dirty"}},
			Info{v, "7712e9304079-dirty", runtime.Version()}},
		{"the VCS stamp wins over the pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v0.7.1-0.20261127123456-000000000000"}, Settings: settings("vcs.revision", rev)},
			Info{v, rev, runtime.Version()}},
		{"a release carries no commit", &debug.BuildInfo{Main: debug.Module{Version: "v0.7.0"}},
			Info{v, Unknown, runtime.Version()}},
		{"a source tree without VCS information", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			Info{v, Unknown, runtime.Version()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, FromBuildInfo(tt.bi)); diff != "" {
				t.Errorf("FromBuildInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v0.7.0", Commit: "7712e93-dirty", GoVersion: "go1.26.8"}.String()
	want := "portico v0.7.0\ncommit 7712e93-dirty\ngo go1.26.8\n"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
