package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// releaseVersion is the content of internal/version/VERSION, the version's one source.
func releaseVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "internal", "version", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// commitLine: a full commit, or the 12 digits of a pseudo-version (go install
// ...@COMMIT), with -dirty for a modified tree; or unknown.
var commitLine = regexp.MustCompile(`^commit (([0-9a-f]{40}|[0-9a-f]{12})(-dirty)?|unknown)$`)

// TestVersionCommand: `portico version`, `--version` and `-version` print the VERSION
// file's version, the commit and the Go version, one line each, and nothing else.
func TestVersionCommand(t *testing.T) {
	bin := portico(t)
	want := releaseVersion(t)
	var first string
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		out, errOut, code := runBinary(t, bin, args...)
		if code != 0 || errOut != "" {
			t.Errorf("portico %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("portico %s printed %d lines, want 3:\n%s", strings.Join(args, " "), len(lines), out)
		}
		if lines[0] != "portico "+want {
			t.Errorf("version line %q, want %q", lines[0], "portico "+want)
		}
		if !commitLine.MatchString(lines[1]) {
			t.Errorf("commit line %q, want %q", lines[1], commitLine)
		}
		// The test and the binary are built by the same toolchain.
		if lines[2] != "go "+runtime.Version() {
			t.Errorf("Go line %q, want %q", lines[2], "go "+runtime.Version())
		}
		if first == "" {
			first = out
		} else if out != first {
			t.Errorf("portico %s printed\n%s\nportico version printed\n%s", strings.Join(args, " "), out, first)
		}
	}

	usageOut, usageErr, _ := runBinary(t, bin, "--help")
	if !strings.Contains(usageOut+usageErr, "version") {
		t.Errorf("--help does not list the version command:\n%s%s", usageOut, usageErr)
	}

	for _, args := range [][]string{{"version", "extra"}, {"--version", "extra"}, {"version", "--nope"}} {
		out, errOut, code := runBinary(t, bin, args...)
		if code != 2 || out != "" || errOut == "" {
			t.Errorf("portico %s: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout and a message", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// TestVersionCommit builds cmd/portico the ways it is built and checks the commit it
// reports: the -ldflags -X stamp when the build has no .git (the Dockerfile), the
// stamp hack/build.sh (the examples' scripts) takes from git, and the Go toolchain's
// VCS stamp of `go build` in an ordinary clone.
func TestVersionCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/portico twice more")
	}
	root := repoRoot()
	build := func(args ...string) string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "portico")
		cmd := exec.Command("go", append(append([]string{"build", "-o", out}, args...), "./cmd/portico")...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, b)
		}
		return out
	}
	commitOf := func(bin string) string {
		t.Helper()
		out, errOut, code := runBinary(t, bin, "version")
		lines := strings.Split(out, "\n")
		if code != 0 || len(lines) < 2 {
			t.Fatalf("portico version: exit %d\n%s%s", code, out, errOut)
		}
		return strings.TrimPrefix(lines[1], "commit ")
	}

	t.Run("ldflags stamp", func(t *testing.T) {
		bin := build("-buildvcs=false", "-ldflags=-X github.com/portico-dev/portico/internal/version.revision=0123456789abcdef")
		if got := commitOf(bin); got != "0123456789abcdef" {
			t.Errorf("commit %q, want the stamped 0123456789abcdef", got)
		}
	})

	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout, or no git: %v", err)
	}
	wantHead := func(t *testing.T, got string) {
		t.Helper()
		if want := strings.TrimSpace(string(head)); got != want && got != want+"-dirty" {
			t.Errorf("commit %q, want HEAD %s (with -dirty if the work tree has changes)", got, want)
		}
	}

	t.Run("hack/build.sh", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "portico")
		// Whatever the Go environment says: GOFLAGS=-buildvcs=false is a common setting.
		cmd := exec.Command(filepath.Join(root, "hack", "build.sh"), out)
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/build.sh: %v\n%s", err, b)
		}
		wantHead(t, commitOf(out))
	})

	t.Run("go build in a clone", func(t *testing.T) {
		if st, err := os.Stat(filepath.Join(root, ".git")); err != nil || !st.IsDir() {
			t.Skip("a git worktree (its .git is a file): the Go toolchain records no commit there; hack/build.sh does")
		}
		wantHead(t, commitOf(build("-buildvcs=true")))
	})
}
