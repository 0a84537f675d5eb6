package manifest

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// memoryOf is what a restart would start from after r: the age of every object, and
// the last good versions standing in for broken files.
func memoryOf(t *testing.T, r *Result) Memory {
	t.Helper()
	m := Memory{Ages: map[Identity]time.Time{}, LastGood: r.LastGood}
	for _, o := range r.Objects {
		acc, err := meta.Accessor(o)
		must(t, err)
		m.Ages[IdentityOf(o)] = acc.GetCreationTimestamp().Time
	}
	return m
}

// A reader started from the memory of an earlier one gives the objects it knew the ages
// they had, whatever the reading order now says; an object it did not know is newer
// than all of them, even in a file read first; and the memory only counts at the first
// load: an object removed and added back afterwards is new.
func TestMemoryKeepsAges(t *testing.T) {
	h := newReaderHarness(t, map[string]string{"m.yaml": svcYAML("owner", 1)})
	h.load(1, 1)
	h.write("a.yaml", svcYAML("later", 1))
	before := h.load(1, 1)
	checkOrder(t, before, "owner", "later")

	// A restart, the files rewritten meanwhile (as a checkout or a copy would), and one
	// object added while nothing watched.
	h.write("m.yaml", svcYAML("owner", 1))
	h.write("a.yaml", svcYAML("later", 1))
	h.write("0.yaml", svcYAML("added-while-stopped", 1))
	restarted := newReader(time.Now)
	restarted.remember(memoryOf(t, before))
	h.r = restarted
	res := h.load(3, 3)
	for _, name := range []string{"owner", "later"} {
		if got, want := ageOf(t, res, name), ageOf(t, before, name); !got.Equal(want) {
			t.Errorf("%s: age %s after the restart, want %s", name, got, want)
		}
	}
	checkOrder(t, res, "owner", "later", "added-while-stopped")

	h.remove("m.yaml")
	h.load(0, 0)
	h.write("m.yaml", svcYAML("owner", 1))
	res = h.load(1, 1)
	checkOrder(t, res, "later", "added-while-stopped", "owner")
}

// Ages that a memory gives twice (a state file edited by hand) still come out distinct,
// in reading order, and in the memory's order otherwise.
func TestMemoryEqualAges(t *testing.T) {
	h := newReaderHarness(t, map[string]string{"a.yaml": svcYAML("a", 1), "b.yaml": svcYAML("b", 1), "c.yaml": svcYAML("c", 1)})
	at := time.Now().Add(-time.Hour).Round(0)
	h.r.remember(Memory{Ages: map[Identity]time.Time{
		{Kind: "Service", Namespace: "default", Name: "a"}: at.Add(time.Minute),
		{Kind: "Service", Namespace: "default", Name: "b"}: at,
		{Kind: "Service", Namespace: "default", Name: "c"}: at,
	}})
	res := h.load(3, 3)
	checkOrder(t, res, "b", "c", "a")
	if got := ageOf(t, res, "a"); !got.Equal(at.Add(time.Minute)) {
		t.Errorf("a: age %s, want the remembered %s", got, at.Add(time.Minute))
	}
}

// A file that is broken at start is served from the last good version the memory has
// for it, the problems saying so, and Result.LastGood lists it for the next restart; once
// fixed, the fix serves and the list is empty; broken again, the list has the fix. A
// remembered version of a file that is clean or gone at start is not used.
func TestMemoryLastGood(t *testing.T) {
	h := newReaderHarness(t, map[string]string{"a.yaml": svcYAML("a", 1), "clean.yaml": svcYAML("clean", 1)})
	h.load(2, 2)
	h.write("a.yaml", "apiVersion: v1\nkind: Service\nmetadata: [\n")
	before := h.load(1, 1)
	if got := lastGoodNames(before); !cmp.Equal(got, []string{"a.yaml: Service default/a"}) {
		t.Fatalf("LastGood before the restart: %v", got)
	}

	mem := memoryOf(t, before)
	// A remembered version of a clean file, and of a file that is gone.
	stale := svcWithPort(t, "clean", 7)
	gone := svcWithPort(t, "gone", 1)
	mem.LastGood = append(mem.LastGood,
		LastGoodFile{Path: h.path("clean.yaml"), Objects: []LastGoodObject{{Object: stale, Line: 1, Document: 1}}},
		LastGoodFile{Path: h.path("gone.yaml"), Objects: []LastGoodObject{{Object: gone, Line: 1, Document: 1}}})
	h.r = newReader(time.Now)
	h.r.remember(mem)
	res := h.load(2, 2)
	if !hasNames("a", "clean")(res) || !servicePort("clean", 1)(res) || !servicePort("a", 1)(res) {
		t.Fatalf("objects after the restart: %v", names(res.Objects))
	}
	if !keepsLastGood(res, "a.yaml") {
		t.Errorf("problems do not say that a.yaml's last good version serves: %v", res.Problems)
	}
	if got := lastGoodNames(res); !cmp.Equal(got, []string{"a.yaml: Service default/a"}) {
		t.Errorf("LastGood after the restart: %v", got)
	}

	h.write("a.yaml", svcYAML("a", 2))
	res = h.load(1, 1)
	if !servicePort("a", 2)(res) || res.LastGood != nil {
		t.Errorf("fixed: objects %v, LastGood %v", names(res.Objects), lastGoodNames(res))
	}
	// Through an update (the watcher's path) as through a full load.
	h.write("a.yaml", "apiVersion: v1\nkind: Service\nmetadata: [\n")
	res, ok := h.r.update(h.dir, []string{h.path("a.yaml")}, h.log)
	if !ok {
		t.Fatal("the update fell back to a full load")
	}
	if got := lastGoodNames(res); !cmp.Equal(got, []string{"a.yaml: Service default/a"}) || !servicePort("a", 2)(res.LastGood[0].asResult()) {
		t.Errorf("broken again: LastGood %v", got)
	}
	h.remove("a.yaml")
	if res, _ = h.r.update(h.dir, []string{h.path("a.yaml")}, h.log); res.LastGood != nil {
		t.Errorf("removed: LastGood %v", lastGoodNames(res))
	}
}

// asResult holds f's objects, for the Result predicates.
func (f LastGoodFile) asResult() *Result {
	r := &Result{}
	for _, o := range f.Objects {
		r.Objects = append(r.Objects, o.Object)
	}
	return r
}

func lastGoodNames(r *Result) []string {
	var out []string
	for _, f := range r.LastGood {
		base := f.Path[strings.LastIndexByte(f.Path, '/')+1:]
		out = append(out, base+": "+strings.Join(names(f.asResult().Objects), ", "))
	}
	return out
}

func keepsLastGood(r *Result, file string) bool {
	for _, p := range r.Problems {
		if strings.HasSuffix(p.File, file) && strings.Contains(p.Reason, "keeping this file's last good version") {
			return true
		}
	}
	return false
}

func (h *readerHarness) remove(name string) {
	h.t.Helper()
	must(h.t, os.Remove(h.path(name)))
}

// svcWithPort decodes a Service called name with one port.
func svcWithPort(t *testing.T, name string, port int) runtime.Object {
	t.Helper()
	objs, probs := Decode("svc.yaml", []byte(svcYAML(name, port)))
	if len(probs) != 0 || len(objs) != 1 {
		t.Fatalf("decode: %v %v", objs, probs)
	}
	return objs[0]
}
