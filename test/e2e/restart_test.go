package e2e

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
)

// Tests of what `portico run` keeps across restarts in its state file: the last good
// version of a broken file, the last valid version of an object edited into an invalid
// one, and the ages that decide who owns a host.

// rootProxy is a root HTTPProxy named name serving host from service.
func rootProxy(name, host, service string) string {
	return `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ` + name + `}
spec:
  virtualhost: {fqdn: ` + host + `}
  routes:
  - conditions: [{prefix: /}]
    services: [{name: ` + service + `, port: 80}]
`
}

// withState is run options keeping the state in a file of the test's.
func withState(t *testing.T) app.RunOptions {
	return app.RunOptions{StateFile: filepath.Join(t.TempDir(), "state", "run.json")}
}

// TestRestartKeepsServingTheLastGoodVersion: an HTTPProxy edited into a broken file (a
// YAML mistake) or an invalid object (a condition without its leading slash) keeps
// serving its last good version, and still does after a restart with the mistake in
// place: the logs of the new process say so. Fixed, the fix is served, and a restart
// serves the fix.
func TestRestartKeepsServingTheLastGoodVersion(t *testing.T) {
	for _, tc := range []struct {
		name, broken string
		// said is what the new process's logs must say about the version served.
		said func(e *env) bool
	}{
		{
			name:   "file that does not decode",
			broken: strings.Replace(rootProxy("app", "app.test", "web"), "  routes:\n", "  routes:\n bad indentation\n", 1),
			said: func(e *env) bool {
				return logged(e, "manifest skipped", "app.yaml", "keeping this file's last good version (1 objects)")
			},
		},
		{
			name:   "invalid object",
			broken: strings.Replace(rootProxy("app", "app.test", "web"), "prefix: /", "prefix: api", 1),
			said: func(e *env) bool {
				return strings.Contains(proxyStatusLine(e, "HTTPProxy", "default", "app", "status=invalid"), "The previous valid version of this object is still served")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startWith(t, map[string]string{
				"backends.yaml": backends(t, "api", "web"),
				"app.yaml":      rootProxy("app", "app.test", "api"),
			}, withState(t))
			e.waitFor("app.test", "/orders", "api", 200)

			e.write("app.yaml", tc.broken)
			e.eventually(10*time.Second, "the mistake to be reported", func() bool { return tc.said(e) })
			e.restart()
			for range 5 {
				if r := e.get("app.test", "/orders"); r.status != 200 || r.service() != "api" {
					t.Fatalf("after the restart app.test/orders answered %d from %q, want the last good version's api", r.status, r.service())
				}
			}
			e.eventually(10*time.Second, "the restarted process to report the mistake and the version it serves", func() bool { return tc.said(e) })

			e.write("app.yaml", rootProxy("app", "app.test", "web"))
			e.waitFor("app.test", "/orders", "web", 200)
			e.restart()
			e.waitFor("app.test", "/orders", "web", 200)
			if tc.said(e) {
				t.Errorf("after the fix and a restart, the logs still speak of a kept version:\n%s", e.logs.String())
			}
		})
	}
}

// logged reports whether a line of e's logs has msg and every one of texts.
func logged(e *env, msg string, texts ...string) bool {
	for _, line := range strings.Split(e.logs.String(), "\n") {
		if !strings.Contains(line, "msg=\""+msg+"\"") && !strings.Contains(line, "msg="+msg+" ") {
			continue
		}
		all := true
		for _, text := range texts {
			all = all && strings.Contains(line, text)
		}
		if all {
			return true
		}
	}
	return false
}

// TestRestartKeepsTheHostOwner: two roots claim shop.test; the one that was there
// first owns it, even though the newcomer's file is read first. Restarts after the
// owner's file is touched, after the tree is copied elsewhere (new modification times,
// the copy pointed at the same state file) and after a `git checkout` rewrote the files
// do not hand the host to the newcomer.
func TestRestartKeepsTheHostOwner(t *testing.T) {
	for _, tc := range []struct {
		name string
		// disturb changes the stopped tree in dir, and returns the directory to serve.
		disturb func(t *testing.T, dir string) string
	}{
		{"touch", func(t *testing.T, dir string) string {
			now := time.Now()
			must(t, os.Chtimes(filepath.Join(dir, "infra.yaml"), now, now))
			return dir
		}},
		{"copy", func(t *testing.T, dir string) string {
			return copyTree(t, dir)
		}},
		{"git checkout", func(t *testing.T, dir string) string {
			gitCheckout(t, dir)
			return dir
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startWith(t, map[string]string{
				"backends.yaml": backends(t, "owner", "intruder"),
				"infra.yaml":    rootProxy("shop", "shop.test", "owner"),
			}, withState(t))
			e.waitFor("shop.test", "/", "owner", 200)
			e.write("hijack.yaml", rootProxy("hijack", "shop.test", "intruder"))
			refused := func() bool {
				return statusLogged(e, "HTTPProxy", "default", "hijack", `belongs to the older HTTPProxy default/shop`)
			}
			e.eventually(10*time.Second, "the newcomer to be refused", refused)

			e.stop()
			e.opts.ManifestDir = tc.disturb(t, e.dir)
			e.launch(e.opts)
			for range 5 {
				if r := e.get("shop.test", "/"); r.status != 200 || r.service() != "owner" {
					t.Fatalf("after the restart shop.test answered %d from %q, want its owner", r.status, r.service())
				}
			}
			e.eventually(10*time.Second, "the restarted process to refuse the newcomer", refused)
			if l := proxyStatusLine(e, "HTTPProxy", "default", "shop", "status=invalid"); l != "" {
				t.Errorf("the owner was made invalid: %s", l)
			}
		})
	}
}

// copyTree copies the manifests in dir to a new directory, the owner's file last, so
// that its modification time is the newest, and returns the copy.
func copyTree(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	now := time.Now()
	for i, name := range []string{"hijack.yaml", "backends.yaml", "infra.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(dst, name), b, 0o644))
		// Distinct times even on a file system with a coarse clock.
		at := now.Add(time.Duration(i) * time.Second)
		must(t, os.Chtimes(filepath.Join(dst, name), at, at))
	}
	return dst
}

// gitCheckout commits dir to a new git repository, removes the manifests and checks
// them out again, as switching branches and back does: every file is written anew.
func gitCheckout(t *testing.T, dir string) {
	t.Helper()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "manifests")
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, en := range entries {
		if en.Type()&fs.ModeType == 0 {
			must(t, os.Remove(filepath.Join(dir, en.Name())))
		}
	}
	git("checkout", "--", ".")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCorruptStateFileIsRebuilt: a state file that cannot be read is reported with its
// path, moved aside, and written again from the manifests; Portico serves meanwhile.
func TestCorruptStateFileIsRebuilt(t *testing.T) {
	opts := withState(t)
	must(t, os.MkdirAll(filepath.Dir(opts.StateFile), 0o700))
	must(t, os.WriteFile(opts.StateFile, []byte(`{"format": "portico run state", "version": 1, "ages": {"Ingress`), 0o600))
	e := startWith(t, map[string]string{
		"backends.yaml": backends(t, "web"),
		"app.yaml":      rootProxy("app", "app.test", "web"),
	}, opts)
	e.waitFor("app.test", "/", "web", 200)
	if !logged(e, "run state unusable; moved aside and rebuilt from the manifests as on a first start: a host that two objects claim goes to the one read first, and a broken file or object has no last good version to serve until fixed",
		"level=WARN", "state_file="+opts.StateFile) {
		t.Errorf("the unusable state file is not reported with its path:\n%s", e.logs.String())
	}
	if _, err := os.Stat(opts.StateFile + ".bad"); err != nil {
		t.Errorf("the unusable file was not moved aside: %v", err)
	}
	e.eventually(10*time.Second, "the state file to be written again", func() bool {
		b, err := os.ReadFile(opts.StateFile)
		return err == nil && strings.Contains(string(b), `"HTTPProxy.projectcontour.io"`)
	})
	e.restart()
	if !logged(e, "run state restored", "state_file="+opts.StateFile) {
		t.Errorf("the rebuilt state was not restored:\n%s", e.logs.String())
	}
	e.waitFor("app.test", "/", "web", 200)
}
