package e2e

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const reloadIngress = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: live}
spec:
  rules:
  - host: live.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: SERVICE, port: {number: 80}}}}]}
`

// TestHotReload edits, adds and deletes manifests while Portico runs; each change must
// reach the data plane within one second, and requests in flight during the changes
// must all succeed.
func TestHotReload(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "blue", "green"),
		"live.yaml":     strings.ReplaceAll(reloadIngress, "SERVICE", "blue"),
	})
	if r := e.get("live.test", "/"); r.service() != "blue" {
		t.Fatalf("initial: %d from %q", r.status, r.service())
	}

	// Keep traffic flowing on another host through all the changes below.
	e.write("steady.yaml", ingressManifest("steady", "steady.test", []pathRule{{"Prefix", "/", "green"}}, ""))
	e.waitFor("steady.test", "/", "green", 200)
	var failures atomic.Int64
	var sent atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				resp, err := e.client.Get("http://" + e.httpAddr() + "/")
				if err != nil {
					failures.Add(1)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != 404 { // no host header match: the proxy's 404, consistently
					failures.Add(1)
				}
			}
		}()
	}
	steady := func() {
		t.Helper()
		if r := e.get("steady.test", "/"); r.service() != "green" {
			t.Errorf("unrelated host broke: %d from %q", r.status, r.service())
		}
	}

	// Edit.
	e.write("live.yaml", strings.ReplaceAll(reloadIngress, "SERVICE", "green"))
	if d := e.waitFor("live.test", "/", "green", 200); d > time.Second {
		t.Errorf("edit took %s to apply, want under 1s", d)
	}
	steady()
	// Delete.
	e.remove("live.yaml")
	if d := e.waitFor("live.test", "/", "", 404); d > time.Second {
		t.Errorf("delete took %s to apply, want under 1s", d)
	}
	steady()
	// Add, in a new subdirectory.
	e.write("team/live.yaml", strings.ReplaceAll(reloadIngress, "SERVICE", "blue"))
	if d := e.waitFor("live.test", "/", "blue", 200); d > time.Second {
		t.Errorf("add took %s to apply, want under 1s", d)
	}
	steady()
	close(stop)
	wg.Wait()
	if failures.Load() != 0 {
		t.Errorf("%d of %d requests failed during reloads", failures.Load(), sent.Load())
	}
}

// TestMalformedManifest: a broken file is reported with file, line and reason, and
// everything else keeps serving, including the last good version of that Ingress.
func TestMalformedManifest(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml": backends(t, "blue"),
		"good.yaml":     ingressManifest("good", "good.test", []pathRule{{"Prefix", "/", "blue"}}, ""),
		"broken.yaml":   "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: broken\nspec: [",
		"typo.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: typo}
spec:
  rules:
  - host: typo.test
    http: {paths: [{path: /, pathtype: Prefix, backend: {service: {name: blue, port: {number: 80}}}}]}
`,
	})
	if r := e.get("good.test", "/"); r.service() != "blue" {
		t.Errorf("good Ingress: %d from %q", r.status, r.service())
	}
	if r := e.get("typo.test", "/"); r.status != 404 {
		t.Errorf("an Ingress with an unknown field must not be served, got %d", r.status)
	}
	logs := e.logs.String()
	for _, want := range []string{"broken.yaml", "typo.yaml", "pathtype", "document=2"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs do not mention %q:\n%s", want, logs)
		}
	}
	// A file broken by an edit (a half-saved file, say) keeps its last good objects
	// serving; deleting the file removes them.
	e.write("good.yaml", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: good\n")
	e.eventually(5*time.Second, "the broken edit to be reported", func() bool {
		return strings.Count(e.logs.String(), "good.yaml") > 0
	})
	time.Sleep(300 * time.Millisecond)
	if r := e.get("good.test", "/"); r.service() != "blue" {
		t.Errorf("good.test after its file broke: %d from %q, want the last good version", r.status, r.service())
	}
	e.remove("good.yaml")
	e.waitFor("good.test", "/", "", 404)
	e.write("other.yaml", ingressManifest("other", "other.test", []pathRule{{"Prefix", "/", "blue"}}, ""))
	e.waitFor("other.test", "/", "blue", 200)
}
