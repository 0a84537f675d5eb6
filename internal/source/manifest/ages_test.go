package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// ageOf returns the creationTimestamp of the object called name (any kind) in r.
func ageOf(t *testing.T, r *Result, name string) time.Time {
	t.Helper()
	for _, o := range r.Objects {
		acc, err := meta.Accessor(o)
		if err == nil && acc.GetName() == name {
			return acc.GetCreationTimestamp().Time
		}
	}
	t.Fatalf("no object %q in %v", name, names(r.Objects))
	return time.Time{}
}

// checkOrder fails unless the objects called want are strictly oldest first.
func checkOrder(t *testing.T, r *Result, want ...string) {
	t.Helper()
	for i := 1; i < len(want); i++ {
		a, b := ageOf(t, r, want[i-1]), ageOf(t, r, want[i])
		if !a.Before(b) {
			t.Errorf("%s (%s) is not older than %s (%s)", want[i-1], a.Format(time.RFC3339Nano), want[i], b.Format(time.RFC3339Nano))
		}
	}
}

func setModTime(t *testing.T, path string, mt time.Time) {
	t.Helper()
	must(t, os.Chtimes(path, mt, mt))
}

// At start-up, objects are as old as their order in the tree: files in reading order
// (names sorted, directory by directory), then documents; no two objects share an age,
// and neither a creationTimestamp written in a manifest nor file modification times
// count: here they say the opposite of the reading order.
func TestLoadDirAges(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml":     svcYAML("a1", 1) + "---\n" + svcYAML("a2", 1),
		"sub/b.yaml": svcYAML("sub-b", 1),
		"b.yaml":     svcYAML("b", 1) + "---\n" + `{"apiVersion": "v1", "kind": "List", "items": [` + svcJSON("b-list1", 1) + "," + svcJSON("b-list2", 1) + "]}\n",
		"c.yaml":     "apiVersion: v1\nkind: Service\nmetadata:\n  name: claims-to-be-old\n  creationTimestamp: \"2001-01-01T00:00:00Z\"\nspec:\n  ports: [{port: 1}]\n",
	})
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, f := range []string{"sub/b.yaml", "c.yaml", "b.yaml", "a.yaml"} {
		setModTime(t, filepath.Join(dir, f), base.Add(time.Duration(i)*time.Hour))
	}

	res, err := LoadDir(dir)
	must(t, err)
	if len(res.Problems) != 0 {
		t.Fatalf("problems: %v", res.Problems)
	}
	// b.yaml, c.yaml and sub/ are read in that order (sorted by name).
	checkOrder(t, res, "a1", "a2", "b", "b-list1", "b-list2", "claims-to-be-old", "sub-b")
	if got := ageOf(t, res, "claims-to-be-old"); got.Year() == 2001 {
		t.Errorf("the creationTimestamp written in the manifest was kept: %s", got)
	}
}

// In `run`, what appears later is newer than everything there, even when the files
// already there have modification times in the future; what stays keeps its age
// through edits and moves; what goes and comes back is new.
func TestWatchAges(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"b.yaml": svcYAML("first", 1), "c.yaml": svcYAML("second", 1)})
	future := time.Now().Add(24 * time.Hour)
	setModTime(t, filepath.Join(dir, "b.yaml"), future)
	setModTime(t, filepath.Join(dir, "c.yaml"), future.Add(time.Second))
	h := startWatch(t, dir)
	r := h.waitFor("initial load", time.Now(), within, hasNames("first", "second"))
	checkOrder(t, r, "first", "second")
	firstAge, secondAge := ageOf(t, r, "first"), ageOf(t, r, "second")

	write := func(name, content string) func() {
		return func() { writeFiles(t, dir, map[string]string{name: content}) }
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	sameAges := func(r *Result) {
		t.Helper()
		if got := ageOf(t, r, "first"); !got.Equal(firstAge) {
			t.Errorf("first's age changed from %s to %s", firstAge, got)
		}
		if got := ageOf(t, r, "second"); !got.Equal(secondAge) {
			t.Errorf("second's age changed from %s to %s", secondAge, got)
		}
	}

	// A new file named to be read first, holding two objects.
	r = h.change("new file", write("a.yaml", svcYAML("new1", 1)+"---\n"+svcYAML("new2", 1)), hasNames("first", "second", "new1", "new2"))
	checkOrder(t, r, "first", "second", "new1", "new2")
	sameAges(r)
	new1 := ageOf(t, r, "new1")

	r = h.change("edit", write("b.yaml", svcYAML("first", 2)), servicePort("first", 2))
	sameAges(r)
	r = h.change("new document in an old file", write("b.yaml", svcYAML("first", 2)+"---\n"+svcYAML("third", 1)), hasNames("first", "second", "new1", "new2", "third"))
	checkOrder(t, r, "first", "second", "new1", "new2", "third")
	sameAges(r)

	r = h.change("move to another file", func() {
		writeFiles(t, dir, map[string]string{"d.yaml": svcYAML("first", 3)})
		must(t, os.WriteFile(p("b.yaml"), []byte(svcYAML("third", 1)), 0o644))
	}, servicePort("first", 3))
	sameAges(r)

	r = h.change("rename the file and edit it", func() {
		must(t, os.Rename(p("a.yaml"), p("z.yaml")))
		must(t, os.WriteFile(p("z.yaml"), []byte(svcYAML("new1", 5)+"---\n"+svcYAML("new2", 1)), 0o644))
	}, servicePort("new1", 5))
	if got := ageOf(t, r, "new1"); !got.Equal(new1) {
		t.Errorf("new1's age changed from %s to %s when its file was renamed", new1, got)
	}

	r = h.change("rename the object", write("z.yaml", svcYAML("renamed", 1)+"---\n"+svcYAML("new2", 1)), hasNames("first", "second", "renamed", "new2", "third"))
	checkOrder(t, r, "third", "renamed")

	h.change("delete", func() { must(t, os.Remove(p("c.yaml"))) }, hasNames("first", "renamed", "new2", "third"))
	r = h.change("add back", write("c.yaml", svcYAML("second", 1)), hasNames("first", "second", "renamed", "new2", "third"))
	checkOrder(t, r, "renamed", "second")
}

// A second definition of a working object, added in a file read before its own, is
// the one reported and ignored: it does not replace the working one.
func TestWatchDuplicateDoesNotReplaceWorkingObject(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"b.yaml": svcYAML("x", 1)})
	h := startWatch(t, dir)
	r := h.waitFor("initial load", time.Now(), within, servicePort("x", 1))
	age := ageOf(t, r, "x")

	r = h.change("copy added in a.yaml", func() { writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("x", 2)}) }, func(r *Result) bool {
		return len(r.Problems) == 1
	})
	if !servicePort("x", 1)(r) {
		t.Errorf("the copy replaced the working definition: %v", r.Objects)
	}
	if p := r.Problems[0]; !strings.HasSuffix(p.File, "a.yaml") || !strings.Contains(p.Reason, "already defined at "+filepath.Join(dir, "b.yaml")) {
		t.Errorf("problem: %s", p)
	}
	if got := ageOf(t, r, "x"); !got.Equal(age) {
		t.Errorf("age changed from %s to %s", age, got)
	}
	// Removing the working definition hands over to the copy, with the object's age.
	r = h.change("original removed", func() { must(t, os.Remove(filepath.Join(dir, "b.yaml"))) }, servicePort("x", 2))
	if len(r.Problems) != 0 {
		t.Errorf("problems: %v", r.Problems)
	}
	if got := ageOf(t, r, "x"); !got.Equal(age) {
		t.Errorf("age changed from %s to %s", age, got)
	}
	// LoadDir, starting afresh, keeps the first definition in reading order.
	writeFiles(t, dir, map[string]string{"b.yaml": svcYAML("x", 1)})
	res, err := LoadDir(dir)
	must(t, err)
	if !servicePort("x", 2)(res) || len(res.Problems) != 1 || !strings.HasSuffix(res.Problems[0].File, "b.yaml") {
		t.Errorf("LoadDir: %v %v", res.Objects, res.Problems)
	}
}

func proxyYAML(name, fqdn string) string {
	return fmt.Sprintf("apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: %s}\nspec:\n  virtualhost: {fqdn: %s}\n  routes: [{services: [{name: s, port: 80}]}]\n", name, fqdn)
}

func delegationYAML(apiVersion string) string {
	return "apiVersion: " + apiVersion + "\nkind: TLSCertificateDelegation\nmetadata: {name: wildcard, namespace: certs}\nspec: {delegations: [{secretName: s, targetNamespaces: ['*']}]}\n"
}

func proxyFqdn(name, fqdn string) func(*Result) bool {
	return func(r *Result) bool {
		for _, o := range r.Objects {
			if p, ok := o.(*contourv1.HTTPProxy); ok && p.Name == name && p.Spec.VirtualHost != nil && p.Spec.VirtualHost.Fqdn == fqdn {
				return true
			}
		}
		return false
	}
}

// HTTPProxies get their ages as every object does: at start-up from their order, later
// from when they appear, kept across edits. The host an HTTPProxy holds depends on it.
// A TLSCertificateDelegation of each group may share a namespace/name: they are two
// objects, not one defined twice.
func TestHTTPProxyAges(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a-old.yaml": proxyYAML("old", "old.example.com"),
		"b-new.yaml": proxyYAML("new", "new.example.com"),
		"certs.yaml": delegationYAML("projectcontour.io/v1") + "---\n" + delegationYAML("contour.heptio.com/v1beta1"),
	})
	// Modification times do not count: the file read first holds the older object.
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	setModTime(t, filepath.Join(dir, "b-new.yaml"), base)
	setModTime(t, filepath.Join(dir, "a-old.yaml"), base.Add(time.Minute))

	res, err := LoadDir(dir)
	must(t, err)
	if len(res.Problems) != 0 {
		t.Fatalf("problems: %v", res.Problems)
	}
	checkOrder(t, res, "old", "new")
	delegations := 0
	for _, o := range res.Objects {
		switch o.(type) {
		case *contourv1.TLSCertificateDelegation, *contourv1beta1.TLSCertificateDelegation:
			delegations++
		}
	}
	if delegations != 2 {
		t.Errorf("TLSCertificateDelegations kept: %d, want one of each group; objects %v", delegations, names(res.Objects))
	}

	// A second definition is reported under the kind, with the group when the kind
	// alone is ambiguous.
	writeFiles(t, dir, map[string]string{"d-copies.yaml": proxyYAML("old", "copy.example.com") + "---\n" + delegationYAML("projectcontour.io/v1")})
	res, err = LoadDir(dir)
	must(t, err)
	var reasons []string
	for _, p := range res.Problems {
		reasons = append(reasons, p.Reason)
	}
	want := []string{
		"HTTPProxy default/old is already defined at " + filepath.Join(dir, "a-old.yaml") + ":1 (document 1); this definition is ignored",
		"TLSCertificateDelegation.projectcontour.io certs/wildcard is already defined at " + filepath.Join(dir, "certs.yaml") + ":1 (document 1); this definition is ignored",
	}
	if diff := cmp.Diff(want, reasons); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	must(t, os.Remove(filepath.Join(dir, "d-copies.yaml")))

	h := startWatch(t, dir)
	r := h.waitFor("initial load", time.Now(), within, proxyFqdn("old", "old.example.com"))
	old, newer := ageOf(t, r, "old"), ageOf(t, r, "new")
	r = h.change("edit", func() {
		writeFiles(t, dir, map[string]string{"a-old.yaml": proxyYAML("old", "edited.example.com")})
	}, proxyFqdn("old", "edited.example.com"))
	if got := ageOf(t, r, "old"); !got.Equal(old) {
		t.Errorf("old's age changed from %s to %s when it was edited", old, got)
	}
	r = h.change("a new HTTPProxy in a file read first", func() {
		writeFiles(t, dir, map[string]string{"0.yaml": proxyYAML("latest", "latest.example.com")})
	}, proxyFqdn("latest", "latest.example.com"))
	checkOrder(t, r, "old", "new", "latest")
	if got := ageOf(t, r, "new"); !got.Equal(newer) {
		t.Errorf("new's age changed from %s to %s", newer, got)
	}
}
