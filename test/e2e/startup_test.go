package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCLI runs the portico binary with args and returns its output and exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runBinary(t, portico(t), args...)
}

// runBinary runs bin with args and returns its output and exit code. It fails the test
// if the command has not ended within a minute.
func runBinary(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	// `portico run` keeps its state in the user's state directory: the test's own.
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s did not end within a minute; stderr:\n%s", filepath.Base(bin), strings.Join(args, " "), errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func manifestDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRunExitsWhenItsPortIsTaken: with the HTTP port held by another process, `portico
// run` ends with a non-zero code and names the address and the cause, instead of
// retrying for ever without becoming ready.
func TestRunExitsWhenItsPortIsTaken(t *testing.T) {
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	taken := blocker.Addr().String()
	dir := manifestDir(t, map[string]string{"ing.yaml": ingressManifest("a", "a.test", []pathRule{{"Prefix", "/", "s"}}, "")})
	_, stderr, code := runCLI(t, "run", "--manifests", dir, "--http-addr", taken, "--https-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")
	if code == 0 {
		t.Fatalf("exit 0 with its port taken; stderr:\n%s", stderr)
	}
	last := lastLine(stderr)
	for _, want := range []string{taken, "address already in use"} {
		if !strings.Contains(last, want) {
			t.Errorf("the final message %q does not mention %q", last, want)
		}
	}
}

// TestRunRefusesBadAddresses: an address no listener could bind is refused at once,
// naming the flag, and nothing claims a configuration "keeps serving".
func TestRunRefusesBadAddresses(t *testing.T) {
	dir := manifestDir(t, nil)
	for _, tc := range []struct{ flag, value string }{
		{"--http-addr", "bogus"},
		{"--https-addr", "127.0.0.1:99999"},
		{"--admin-addr", "127.0.0.1:http-ish"},
	} {
		_, stderr, code := runCLI(t, "run", "--manifests", dir, tc.flag, tc.value)
		if code != 1 {
			t.Errorf("%s %s: exit %d, want 1", tc.flag, tc.value, code)
		}
		if !strings.Contains(stderr, tc.flag) || !strings.Contains(stderr, tc.value) {
			t.Errorf("%s %s: stderr does not name the flag and value:\n%s", tc.flag, tc.value, stderr)
		}
		if strings.Contains(stderr, "keeps serving") {
			t.Errorf("%s %s: claims a configuration keeps serving:\n%s", tc.flag, tc.value, stderr)
		}
	}
}

// TestCommandsRefuseStrayArguments: a positional argument a command does not take is an
// error (`portico run manifests/` would otherwise start without the manifests).
func TestCommandsRefuseStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--manifests", t.TempDir(), "extra"},
		{"serve", "extra"},
		{"proxy", "--xds-server", "127.0.0.1:1", "extra"},
		{"echo", "--listen", "127.0.0.1:0", "--service", "s", "extra"},
		{"certgen", "--out-dir", t.TempDir(), "extra"},
		{"check", t.TempDir(), "another-dir"},
		{"bootstrap", filepath.Join(t.TempDir(), "b.yaml"), "another-path"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code == 0 {
			t.Errorf("portico %s: exit 0", strings.Join(args, " "))
		}
		if !strings.Contains(stderr, "extra") && !strings.Contains(stderr, "another") {
			t.Errorf("portico %s: stderr does not name the stray argument:\n%s", strings.Join(args, " "), stderr)
		}
	}
}

// TestCommandLineErrorsNameWhatToFix: a directory given twice, differently, names both;
// a missing one or a file says so; `serve --kubeconfig` with no such file names the flag
// and the path.
func TestCommandLineErrorsNameWhatToFix(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "shop.yaml")
	if err := os.WriteFile(file, []byte("# nothing yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nonexistent")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "--manifests", dir, other}, []string{"--manifests", dir, other, "different directories"}},
		{[]string{"run", missing}, []string{missing, "no such file or directory"}},
		{[]string{"run", file}, []string{file, "is a file"}},
		{[]string{"run"}, []string{"portico run DIR"}},
		{[]string{"serve", "--kubeconfig", missing}, []string{"--kubeconfig " + missing, "no such file or directory"}},
	} {
		_, stderr, code := runCLI(t, tc.args...)
		if code == 0 {
			t.Errorf("portico %s: exit 0", strings.Join(tc.args, " "))
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("portico %s: stderr does not say %q:\n%s", strings.Join(tc.args, " "), w, stderr)
			}
		}
	}
}

// TestHelpNamesArguments: each command's -h starts with a usage line naming its
// positional arguments, and no flag shows a stray value name.
func TestHelpNamesArguments(t *testing.T) {
	for cmd, want := range map[string]string{
		"check":     "Usage: portico check DIR",
		"bootstrap": "Usage: portico bootstrap PATH",
		"run":       "Usage: portico run --manifests DIR",
		"serve":     "Usage: portico serve",
		"proxy":     "Usage: portico proxy --xds-server ADDR",
		"echo":      "Usage: portico echo --listen ADDR --service NAME",
		"certgen":   "Usage: portico certgen",
	} {
		_, stderr, code := runCLI(t, cmd, "-h")
		if code != 0 {
			t.Errorf("%s -h: exit %d", cmd, code)
		}
		if !strings.HasPrefix(stderr, want) {
			t.Errorf("%s -h starts with %q, want %q", cmd, firstLine(stderr), want)
		}
		for _, line := range strings.Split(stderr, "\n") {
			// The flag package shows a back-quoted word of a flag's description as the
			// flag's value name: "-enable-external-name-services run" was one.
			if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[0], "-") && f[1] == "run" {
				t.Errorf("%s -h: stray value name in %q", cmd, line)
			}
		}
	}
}

// TestCheckAllowOrphaned: a blue-green standby is orphaned by design; --allow-orphaned
// lets check pass with it, but never with an invalid object.
func TestCheckAllowOrphaned(t *testing.T) {
	standby := `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: green}
spec:
  routes:
  - match: /
    services: [{name: s, port: 80}]
`
	dir := manifestDir(t, map[string]string{"standby.yaml": standby})
	if _, _, code := runCLI(t, "check", dir); code != 1 {
		t.Errorf("an orphaned IngressRoute without --allow-orphaned: exit %d, want 1", code)
	}
	if out, stderr, code := runCLI(t, "check", dir, "--allow-orphaned"); code != 0 {
		t.Errorf("an orphaned IngressRoute with --allow-orphaned: exit %d, want 0\n%s%s", code, out, stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte(ingressManifest("bad", "bad.test", []pathRule{{"Prefix", "nope", "s"}}, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, code := runCLI(t, "check", dir, "--allow-orphaned"); code != 1 {
		t.Errorf("an invalid Ingress with --allow-orphaned: exit %d, want 1", code)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestBootstrapStatsAddress: `portico bootstrap --stats-address` moves Envoy's Prometheus
// listener, and the admin interface is refused anywhere but loopback.
func TestBootstrapStatsAddress(t *testing.T) {
	path := filepath.Join(t.TempDir(), "envoy.json")
	if _, stderr, code := runCLI(t, "bootstrap", path, "--stats-address", "0.0.0.0:9102"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "9102") {
		t.Errorf("the bootstrap does not listen on the stats port 9102:\n%s", b)
	}
	if _, _, code := runCLI(t, "bootstrap", path, "--admin-address", "0.0.0.0:9001"); code == 0 {
		t.Error("an admin interface on 0.0.0.0 was accepted")
	}
}
