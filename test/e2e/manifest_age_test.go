package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
)

// TestNewIngressNeverTakesTrafficFromAWorkingOne: a new file claiming a host and path
// that a running Ingress serves is the one rejected, even though its file and its name
// sort first (in a directory every object used to be equally old, and names broke the
// tie). `portico check` has no history: it decides as a first start would, by reading
// order, whatever the files' modification times.
func TestNewIngressNeverTakesTrafficFromAWorkingOne(t *testing.T) {
	e := start(t, map[string]string{
		"backends.yaml":   backends(t, "shop-api", "intruder"),
		"quickstart.yaml": ingressManifest("quickstart", "shop.localhost", []pathRule{{"Prefix", "/api", "shop-api"}}, ""),
	})
	e.waitFor("shop.localhost", "/api", "shop-api", 200)

	e.write("a-conflict.yaml", ingressManifest("conflict", "shop.localhost", []pathRule{{"Prefix", "/api", "intruder"}}, ""))
	e.eventually(5*time.Second, "the new Ingress to be reported invalid", func() bool {
		return statusLine(e.logs.String(), "conflict", "invalid") != ""
	})
	line := statusLine(e.logs.String(), "conflict", "invalid")
	if !strings.Contains(line, "conflicts with older Ingresses") || !strings.Contains(line, "default/quickstart") {
		t.Errorf("the new Ingress's status does not name the conflict: %s", line)
	}
	if l := statusLine(e.logs.String(), "quickstart", "invalid"); l != "" {
		t.Errorf("the working Ingress was made invalid: %s", l)
	}
	for range 5 {
		if r := e.get("shop.localhost", "/api/cart"); r.status != 200 || r.service() != "shop-api" {
			t.Fatalf("shop.localhost/api/cart after the conflicting file appeared: %d from %q, want shop-api", r.status, r.service())
		}
	}

	// `portico check` loads the directory once, as a first start: the file read first
	// holds the older Ingress. Modification times that say otherwise do not count.
	now := time.Now()
	for name, mt := range map[string]time.Time{
		"backends.yaml": now.Add(-time.Hour), "quickstart.yaml": now.Add(-time.Hour), "a-conflict.yaml": now,
	} {
		if err := os.Chtimes(filepath.Join(e.dir, name), mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	res, err := app.Check(e.dir, dag.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 0 {
		t.Errorf("check: problems %v", res.Problems)
	}
	got := map[string]*dag.Status{}
	for _, s := range res.Statuses {
		got[s.Object.Name] = s
	}
	if s := got["conflict"]; s.Status != dag.StatusValid {
		t.Errorf("check: conflict (in the file read first) is %s (%s), want valid", s.Status, s.Description)
	}
	if s := got["quickstart"]; s.Status != dag.StatusInvalid || !strings.Contains(s.Description, "default/conflict") {
		t.Errorf("check: quickstart is %s (%s), want invalid naming default/conflict", s.Status, s.Description)
	}
}

// statusLine returns the last status log line of the Ingress called name with status
// st, or "".
func statusLine(logs, name, st string) string {
	found := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "msg=status") && strings.Contains(l, " name="+name+" ") && strings.Contains(l, " status="+st+" ") {
			found = l
		}
	}
	return found
}
