package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// portico check --contour lists the differences after the statuses (table), or on
// stderr with stdout one JSON array (-o json); the exit code stays check's.
func TestCheckContour(t *testing.T) {
	bin := portico(t)
	dir := "../../internal/contourdiff/testdata/manifests"
	out, errOut, code := runBinary(t, bin, "check", dir, "--contour", "--ingress-class-name", "contour")
	if code != 1 { // platform/optout and globalauth name a TLS Secret that is not there
		t.Errorf("exit %d, want 1 (an invalid object)\n%s", code, errOut)
	}
	statuses, diffs, ok := strings.Cut(out, "Differences from Contour (10; docs/contour.md explains each):\n")
	if !ok || !strings.Contains(statuses, "NAMESPACE") {
		t.Fatalf("stdout: statuses then 10 differences expected:\n%s", out)
	}
	for _, want := range []string{
		"teams.yaml: HTTPProxy platform/root: spec.includes[0]: Contour: a request that matches an include's conditions",
		"teams.yaml: HTTPProxy blog/blog: spec.routes[0].services[1].validation: Contour: ",
		"services.yaml: HTTPProxy platform/globalauth: spec.virtualhost.authorization: Contour: ",
	} {
		if !strings.Contains(diffs, want) {
			t.Errorf("differences lack %q:\n%s", want, diffs)
		}
	}
	if strings.Contains(diffs, "Service blog/posts") {
		t.Errorf("the circuit breaker and upstream protocol annotations behave as in Contour, yet are listed:\n%s", diffs)
	}
	if strings.Contains(diffs, "services[0].validation") {
		t.Errorf("posts:443 is annotated for TLS, yet its validation is listed:\n%s", diffs)
	}
	out, errOut, _ = runBinary(t, bin, "check", dir, "--contour", "-o", "json")
	var entries []map[string]any
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Errorf("-o json --contour: stdout is not one JSON array: %v\n%s", err, out)
	}
	if !strings.Contains(errOut, "Differences from Contour (10;") {
		t.Errorf("-o json --contour: stderr lacks the differences:\n%s", errOut)
	}
}
