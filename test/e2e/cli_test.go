package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
)

// portico returns the path of a freshly built cmd/portico.
func portico(t *testing.T) string { return testutil.PorticoBinary(t) }

func TestCheckCommand(t *testing.T) {
	bin := portico(t)
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good.yaml", ingressManifest("good", "good.test", []pathRule{{"Prefix", "/", "s"}}, ""))
	run := func(args ...string) (string, string, int) { return runBinary(t, bin, args...) }
	if out, errOut, code := run("check", dir, "-o", "json"); code != 0 {
		t.Fatalf("all valid: exit %d\n%s\n%s", code, out, errOut)
	}
	write("bad.yaml", ingressManifest("bad", "bad.test", []pathRule{{"Prefix", "nope", "s"}}, "")+`---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: theirs, namespace: other, annotations: {kubernetes.io/ingress.class: nginx}}
spec: {defaultBackend: {service: {name: s, port: {number: 80}}}}
`)
	out, _, code := run("check", dir, "-o", "json")
	if code != 1 {
		t.Errorf("with an invalid Ingress: exit %d, want 1", code)
	}
	var entries []map[string]string
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("stdout is not one JSON array: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, e := range entries {
		for _, k := range []string{"kind", "namespace", "name", "status", "description"} {
			if _, ok := e[k]; !ok {
				t.Errorf("entry %v lacks %q", e, k)
			}
		}
		got[e["namespace"]+"/"+e["name"]] = e["status"]
		if e["name"] == "bad" && !strings.Contains(e["description"], `must begin with "/"`) {
			t.Errorf("bad's description does not say why: %q", e["description"])
		}
	}
	want := map[string]string{"default/good": "valid", "default/bad": "invalid", "other/theirs": "ignored"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: status %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	// Table output for people, and malformed files reported on stderr with file and line.
	write("broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: [\n")
	out, errOut, code := run("check", dir)
	if code != 1 || !strings.Contains(out, "NAMESPACE") || !strings.Contains(errOut, "broken.yaml:") {
		t.Errorf("table: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, _, code := run("check"); code != 2 {
		t.Errorf("no directory: exit %d, want 2", code)
	}
}

func TestEchoCommand(t *testing.T) {
	bin := portico(t)
	addr := testutil.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "echo", "--listen", addr, "--service", "svc", "--namespace", "ns")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	var resp *http.Response
	var err error
	for i := 0; i < 100; i++ {
		req, _ := http.NewRequest("GET", "http://"+addr+"/p/q?x=1", nil)
		req.Header.Set("X-Echo-Status", "201")
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body echo.Response
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 201 || body.Service != "svc" || body.Namespace != "ns" || body.Endpoint != addr || body.Path != "/p/q" || body.Method != "GET" || body.Proto != "HTTP/1.1" {
		t.Errorf("echo answered %d %+v", resp.StatusCode, body)
	}
}

// TestRunCommand starts the binary as a user would and sends traffic through it, with
// the directory given as --manifests DIR, or as the argument (as `portico check` takes
// it) before the flags.
func TestRunCommand(t *testing.T) {
	t.Run("--manifests DIR", func(t *testing.T) {
		testRunCommand(t, func(dir string, flags ...string) []string {
			return append([]string{"run", "--manifests", dir}, flags...)
		})
	})
	t.Run("DIR", func(t *testing.T) {
		testRunCommand(t, func(dir string, flags ...string) []string { return append([]string{"run", dir}, flags...) })
	})
}

func testRunCommand(t *testing.T, args func(dir string, flags ...string) []string) {
	bin := portico(t)
	dir := t.TempDir()
	backend := startEcho(t, "default", "web")
	manifests := serviceManifest("default", "web", backend) + "---\n" +
		ingressManifest("web", "web.test", []pathRule{{"Prefix", "/", "web"}}, "")
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	httpAddr, httpsAddr, adminAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	cmd := exec.Command(bin, args(dir, "--http-addr", httpAddr, "--https-addr", httpsAddr, "--admin-addr", adminAddr)...)
	// The state file goes to the user's state directory: the test's own.
	stateHome := t.TempDir()
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateHome)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("portico run did not exit cleanly on SIGINT: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("portico run did not exit within 10s of SIGINT")
		}
		// Saved on the way out, where docs/run-mode.md says: one file per manifest
		// directory under $XDG_STATE_HOME/portico/run.
		states, _ := filepath.Glob(filepath.Join(stateHome, "portico", "run", filepath.Base(dir)+"-*.json"))
		if len(states) != 1 {
			t.Errorf("state files: %v, want one under %s/portico/run", states, stateHome)
		} else if b, err := os.ReadFile(states[0]); err != nil || !strings.Contains(string(b), `"Ingress.networking.k8s.io"`) {
			t.Errorf("the state file does not hold the Ingress's age: %v\n%s", err, b)
		}
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	}()
	ready := false
	for i := 0; i < 200 && !ready; i++ {
		if resp, err := http.Get("http://" + adminAddr + "/readyz"); err == nil {
			ready = resp.StatusCode == 200
			resp.Body.Close()
		}
		if !ready {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !ready {
		t.Fatal("/readyz never became 200")
	}
	req, _ := http.NewRequest("GET", "http://"+httpAddr+"/hello", nil)
	req.Host = "web.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"service":"web"`) {
		t.Errorf("GET web.test/hello: %d %s", resp.StatusCode, body)
	}
	// The access log (a logger of its own, batched) reaches stderr as the process's lines do.
	for deadline := time.Now().Add(5 * time.Second); !accessLogged(logs.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no access log line for GET web.test/hello in:\n%s", logs.String())
		}
	}
}

// accessLogged reports whether logs (text format) have the access log line of GET
// web.test/hello, attributed to the proxy.
func accessLogged(logs string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "msg=access") && strings.Contains(line, "component=proxy") &&
			strings.Contains(line, "web.test") && strings.Contains(line, "/hello") {
			return true
		}
	}
	return false
}
