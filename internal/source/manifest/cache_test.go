package manifest

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
)

// readerHarness loads one directory again and again with one reader, as Watch does,
// without Watch's timing: each load is one step of the test.
type readerHarness struct {
	t    *testing.T
	dir  string
	r    *reader
	log  *slog.Logger
	last *Result
	// tick gives each write its own modification time, an hour in the past: out of
	// racyWindow, so that an untouched file is trusted from its stat alone.
	tick time.Time
}

func newReaderHarness(t *testing.T, files map[string]string) *readerHarness {
	h := &readerHarness{t: t, dir: t.TempDir(), r: newReader(time.Now), tick: time.Now().Add(-time.Hour).Round(time.Second),
		log: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for name, content := range files {
		h.write(name, content)
	}
	return h
}

// write writes one file with a modification time of its own in the past.
func (h *readerHarness) write(name, content string) {
	h.t.Helper()
	writeFiles(h.t, h.dir, map[string]string{name: content})
	h.touch(name)
}

func (h *readerHarness) touch(name string) {
	h.t.Helper()
	h.tick = h.tick.Add(time.Second)
	setModTime(h.t, filepath.Join(h.dir, name), h.tick)
}

func (h *readerHarness) path(name string) string { return filepath.Join(h.dir, name) }

// load loads the directory and checks how many files were read and decoded.
func (h *readerHarness) load(reads, decodes int) *Result {
	h.t.Helper()
	res, err := h.r.load(h.dir, h.log)
	must(h.t, err)
	if h.r.cache.reads != reads || h.r.cache.decodes != decodes {
		h.t.Errorf("files read %d, decoded %d; want %d and %d", h.r.cache.reads, h.r.cache.decodes, reads, decodes)
	}
	h.last = res
	return res
}

// object returns the object called name (any kind) in r.
func object(t *testing.T, r *Result, name string) runtime.Object {
	t.Helper()
	for _, o := range r.Objects {
		if strings.HasSuffix(names([]runtime.Object{o})[0], "/"+name) {
			return o
		}
	}
	t.Fatalf("no object %q in %v", name, names(r.Objects))
	return nil
}

// samePointers fails unless each object called name is the very object of prev.
func samePointers(t *testing.T, prev, cur *Result, name ...string) {
	t.Helper()
	for _, n := range name {
		if object(t, prev, n) != object(t, cur, n) {
			t.Errorf("%s is a new object, want the one handed out before", n)
		}
	}
}

// changes describes a change set as "+name", "~name" (updated) and "-name".
func changes(cs []Change) []string {
	var out []string
	for _, c := range cs {
		switch {
		case c.Old == nil:
			out = append(out, "+"+names([]runtime.Object{c.New})[0])
		case c.New == nil:
			out = append(out, "-"+names([]runtime.Object{c.Old})[0])
		default:
			out = append(out, "~"+names([]runtime.Object{c.New})[0])
		}
	}
	return out
}

func checkChanges(t *testing.T, r *Result, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, changes(r.Changes)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
}

// A reload reads only the files whose stat changed and decodes only those whose content
// changed; everything else is handed out again as the very same objects, and the change
// set says what changed.
func TestReaderReadsOnlyChangedFiles(t *testing.T) {
	h := newReaderHarness(t, map[string]string{"a.yaml": svcYAML("a", 1), "b.yaml": svcYAML("b", 1), "c.yaml": svcYAML("c", 1)})
	first := h.load(3, 3)
	checkChanges(t, first, "+Service default/a", "+Service default/b", "+Service default/c")

	r := h.load(0, 0)
	checkChanges(t, r)
	samePointers(t, first, r, "a", "b", "c")

	h.write("b.yaml", svcYAML("b", 2))
	r = h.load(1, 1)
	checkChanges(t, r, "~Service default/b")
	samePointers(t, first, r, "a", "c")
	if c := r.Changes[0]; c.Old != object(t, first, "b") || c.New != object(t, r, "b") || !servicePort("b", 2)(r) {
		t.Errorf("update of b: old %p new %p, want the objects of the two Results", c.Old, c.New)
	}

	h.touch("c.yaml")
	r = h.load(1, 0)
	checkChanges(t, r)
	samePointers(t, first, r, "a", "c")

	h.write("d.yaml", svcYAML("d", 1))
	r = h.load(1, 1)
	checkChanges(t, r, "+Service default/d")

	a := object(t, r, "a")
	must(t, os.Remove(h.path("a.yaml")))
	r = h.load(0, 0)
	checkChanges(t, r, "-Service default/a")
	if r.Changes[0].Old != a {
		t.Error("the removal does not hand back the object removed")
	}
	if !hasNames("b", "c", "d")(r) {
		t.Errorf("objects %v", names(r.Objects))
	}
}

// An object that comes out of a decode equal to the one handed out, age included, is
// handed out again: a file renamed, an object moved to another file, another document of
// its file edited.
func TestReaderKeepsObjectsThatDidNotChange(t *testing.T) {
	h := newReaderHarness(t, map[string]string{"a.yaml": svcYAML("x", 1) + "---\n" + svcYAML("w", 1), "b.yaml": svcYAML("z", 1)})
	first := h.load(2, 2)

	h.write("a.yaml", svcYAML("x", 2)+"---\n"+svcYAML("w", 1))
	r := h.load(1, 1)
	checkChanges(t, r, "~Service default/x")
	samePointers(t, first, r, "w", "z")

	h.write("b.yaml", svcYAML("z", 1)+"---\n"+svcYAML("w", 1))
	h.write("a.yaml", svcYAML("x", 2))
	r = h.load(2, 2)
	checkChanges(t, r)
	samePointers(t, first, r, "w", "z")

	must(t, os.Rename(h.path("b.yaml"), h.path("c.yaml")))
	r = h.load(1, 1)
	checkChanges(t, r)
	samePointers(t, first, r, "w", "z")
	// The renamed file's objects are the ones handed out from now on: a reload with no
	// change does not decode or compare anything.
	r = h.load(0, 0)
	checkChanges(t, r)
	samePointers(t, first, r, "w", "z")
}

// A copy of an object in another file changes nothing while the definition in force
// stays; when that one goes, the copy takes over as an update.
func TestReaderDuplicateChanges(t *testing.T) {
	h := newReaderHarness(t, map[string]string{"b.yaml": svcYAML("x", 1)})
	first := h.load(1, 1)
	snapshot := deepCopies(first.Objects)

	h.write("a.yaml", svcYAML("x", 2))
	r := h.load(1, 1)
	checkChanges(t, r)
	samePointers(t, first, r, "x")
	if len(r.Problems) != 1 {
		t.Errorf("problems %v, want the copy reported", r.Problems)
	}
	r = h.load(0, 0)
	if len(r.Problems) != 1 {
		t.Errorf("unchanged files: problems %v, want the copy reported again", r.Problems)
	}

	must(t, os.Remove(h.path("a.yaml")))
	r = h.load(0, 0)
	checkChanges(t, r)
	samePointers(t, first, r, "x")

	h.write("a.yaml", svcYAML("x", 2))
	h.load(1, 1)
	must(t, os.Remove(h.path("b.yaml")))
	r = h.load(0, 0)
	checkChanges(t, r, "~Service default/x")
	if r.Changes[0].Old != object(t, first, "x") || !servicePort("x", 2)(r) {
		t.Errorf("the copy did not take over as an update: %v", r.Objects)
	}
	if !ageOf(t, r, "x").Equal(ageOf(t, first, "x")) {
		t.Errorf("x's age changed from %s to %s", ageOf(t, first, "x"), ageOf(t, r, "x"))
	}
	// The copy was stamped with x's age as a copy of the cached object: from now on,
	// that copy is handed out.
	again := h.load(0, 0)
	checkChanges(t, again)
	samePointers(t, r, again, "x")
	checkUnmodified(t, first.Objects, snapshot)
}

// A broken file that stays broken is not decoded again; its problems are in every
// Result, as they are when every file is read, and its last good objects stay the same.
func TestReaderBrokenFileUnchanged(t *testing.T) {
	h := newReaderHarness(t, map[string]string{"a.yaml": svcYAML("a", 1), "b.yaml": svcYAML("b", 1)})
	first := h.load(2, 2)
	h.write("a.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: a\n")
	for i, reads := range []int{1, 0, 0} {
		r := h.load(reads, reads)
		checkChanges(t, r)
		samePointers(t, first, r, "a", "b")
		if len(r.Problems) != 2 || !strings.Contains(r.Problems[1].Reason, "last good version") {
			t.Errorf("load %d: problems %v, want the file's problem and the last good version kept", i, r.Problems)
		}
	}
	h.write("a.yaml", svcYAML("a", 2))
	r := h.load(1, 1)
	checkChanges(t, r, "~Service default/a")
	if len(r.Problems) != 0 {
		t.Errorf("problems %v", r.Problems)
	}
}

// Within racyWindow of a file's modification time, its stat cannot tell a rewrite in
// the same clock tick: the file is read again, and decoded only if its content changed.
func TestReaderRecentFilesAreHashed(t *testing.T) {
	h := newReaderHarness(t, nil)
	writeFiles(t, h.dir, map[string]string{"a.yaml": svcYAML("a", 1)})
	fi, err := os.Stat(h.path("a.yaml"))
	must(t, err)
	first := h.load(1, 1)
	r := h.load(1, 0)
	samePointers(t, first, r, "a")

	// Same size, same modification time, other content.
	writeFiles(t, h.dir, map[string]string{"a.yaml": svcYAML("a", 2)})
	setModTime(t, h.path("a.yaml"), fi.ModTime())
	r = h.load(1, 1)
	if !servicePort("a", 2)(r) {
		t.Errorf("rewrite in the same tick missed: %v", r.Objects)
	}
	checkChanges(t, r, "~Service default/a")
}

// A file made unreadable is read again (its mode changed), and its last good version
// stays with a problem, as without the cache.
func TestReaderFileMadeUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	h := newReaderHarness(t, map[string]string{"a.yaml": svcYAML("a", 1)})
	first := h.load(1, 1)
	must(t, os.Chmod(h.path("a.yaml"), 0))
	r := h.load(1, 0)
	checkChanges(t, r)
	samePointers(t, first, r, "a")
	if len(r.Problems) != 2 || !strings.Contains(r.Problems[0].Reason, "cannot read") {
		t.Errorf("problems %v", r.Problems)
	}
	must(t, os.Chmod(h.path("a.yaml"), 0o644))
	r = h.load(1, 1)
	checkChanges(t, r)
	samePointers(t, first, r, "a")
}

// Watch keeps one reader: an object whose file did not change is the same pointer in
// the next Result, and each Result's change set is against the one before.
func TestWatchChangeSets(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1), "b.yaml": svcYAML("b", 1)})
	h := startWatch(t, dir)
	first := h.waitFor("initial load", time.Now(), within, hasNames("a", "b"))
	checkChanges(t, first, "+Service default/a", "+Service default/b")
	snapshot := deepCopies(first.Objects)

	var seen []string
	collect := func(ok func(*Result) bool) func(*Result) bool {
		return func(r *Result) bool {
			seen = append(seen, changes(r.Changes)...)
			return ok(r)
		}
	}
	r := h.change("edit b", func() { writeFiles(t, dir, map[string]string{"b.yaml": svcYAML("b", 2)}) }, collect(servicePort("b", 2)))
	samePointers(t, first, r, "a")
	r = h.change("add c", func() { writeFiles(t, dir, map[string]string{"c.yaml": svcYAML("c", 1)}) }, collect(hasNames("a", "b", "c")))
	samePointers(t, first, r, "a")
	h.change("remove b", func() { must(t, os.Remove(filepath.Join(dir, "b.yaml"))) }, collect(hasNames("a", "c")))
	if diff := cmp.Diff([]string{"~Service default/b", "+Service default/c", "-Service default/b"}, seen); diff != "" {
		t.Errorf("changes over the reloads (-want +got):\n%s", diff)
	}
	checkUnmodified(t, first.Objects, snapshot)
}

func deepCopies(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out
}

// checkUnmodified fails if objects handed out were modified since snapshot was taken.
func checkUnmodified(t *testing.T, objs, snapshot []runtime.Object) {
	t.Helper()
	for i, o := range objs {
		if !equality.Semantic.DeepEqual(o, snapshot[i]) {
			t.Errorf("%s was modified after it was handed out", names(objs[i : i+1])[0])
		}
	}
}

// BenchmarkReload is one reload of 10,000 files of which one changed, the case of an
// edit in `portico run`: walking the whole tree, and updating from the changed name.
func BenchmarkReload(b *testing.B) {
	dir := benchTree(b, 10000, 2)
	edited := filepath.Join(dir, "team-5", "app-500.yaml")
	log := slog.New(slog.DiscardHandler)
	port := 1000 // every write a new version, across runs of the sub-benchmarks
	for _, mode := range []string{"walk", "update"} {
		b.Run(mode, func(b *testing.B) {
			r := newReader(time.Now)
			_, err := r.load(dir, log)
			must(b, err)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				port++
				must(b, os.WriteFile(edited, []byte(svcYAML("app-500", port)), 0o644))
				b.StartTimer()
				var res *Result
				if mode == "walk" {
					res, err = r.load(dir, log)
					must(b, err)
				} else if res, _ = r.update(dir, []string{edited}, log); res == nil {
					b.Fatal("no update")
				}
				if len(res.Changes) == 0 {
					b.Fatal("the edit was not seen")
				}
			}
		})
	}
}

// BenchmarkUpdate is the reload after one of 10,000 files of three objects each was
// saved with one object changed, from the name the file system event carries: the case
// of an edit in `portico run`.
func BenchmarkUpdate(b *testing.B) {
	dir := benchTree(b, 10000, 3)
	edited := filepath.Join(dir, "team-5", "app-500.yaml")
	log := slog.New(slog.DiscardHandler)
	r := newReader(time.Now)
	_, err := r.load(dir, log)
	must(b, err)
	goruntime.GC() // not to charge the first updates with collecting what loading left
	port := 1000   // every write a new version, across the rounds of the sub-benchmark
	b.Run("one-file", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			port++
			must(b, os.WriteFile(edited, []byte(benchFile(500, 3, port)), 0o644))
			b.StartTimer()
			res, ok := r.update(dir, []string{edited}, log)
			if !ok || len(res.Changes) != 1 || len(res.Objects) != 30000 {
				b.Fatalf("update %v: %d changes, %d objects; want 1 and 30,000", ok, len(res.Changes), len(res.Objects))
			}
		}
	})
	// As editors save: a temporary file renamed over the file, both names reported.
	tmp := filepath.Join(dir, "team-5", ".app-500.yaml.tmp")
	b.Run("atomic-save", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			port++
			must(b, os.WriteFile(tmp, []byte(benchFile(500, 3, port)), 0o644))
			must(b, os.Rename(tmp, edited))
			b.StartTimer()
			res, ok := r.update(dir, []string{tmp, edited}, log)
			if !ok || len(res.Changes) != 1 {
				b.Fatalf("update %v: %d changes; want 1", ok, len(res.Changes))
			}
		}
	})
	// A file added, then removed, in turn: three objects appear or disappear.
	added := filepath.Join(dir, "team-5", "app-500-new.yaml")
	present := false // across the rounds of the sub-benchmark
	b.Run("add-remove", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			if present {
				must(b, os.Remove(added))
			} else {
				must(b, os.WriteFile(added, []byte(benchFile(10000, 3, 80)), 0o644))
			}
			present = !present
			b.StartTimer()
			res, ok := r.update(dir, []string{added}, log)
			if !ok || len(res.Changes) != 3 {
				b.Fatalf("update %v: %d changes; want 3", ok, len(res.Changes))
			}
		}
	})
}

// benchTree writes files files of perFile Services each, an hour old, as
// team-K/app-I.yaml, 100 to a directory, and returns the directory.
func benchTree(b *testing.B, files, perFile int) string {
	dir := b.TempDir()
	old := time.Now().Add(-time.Hour)
	for i := range files {
		name := filepath.Join(dir, fmt.Sprintf("team-%d", i/100), fmt.Sprintf("app-%d.yaml", i))
		writeFiles(b, dir, map[string]string{strings.TrimPrefix(name, dir+"/"): benchFile(i, perFile, 80)})
		must(b, os.Chtimes(name, old, old))
	}
	return dir
}

// benchFile is file i of benchTree, its first Service on port.
func benchFile(i, perFile, port int) string {
	docs := []string{svcYAML(fmt.Sprintf("app-%d", i), port)}
	for j := 1; j < perFile; j++ {
		docs = append(docs, svcYAML(fmt.Sprintf("app-%d-%c", i, 'a'+j), 80+j))
	}
	return strings.Join(docs, "---\n")
}

// Random sequences of file operations: after every reload, applying the change sets of
// all Results so far to an empty set gives exactly the Result's objects, pointer for
// pointer, and no object handed out was modified since.
func TestReaderChangeSetsAddUp(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 3))
	h := newReaderHarness(t, nil)
	files := []string{"a.yaml", "b.yaml", "sub/c.yaml", "sub/d.yaml", "e.json"}
	objNames := []string{"p", "q", "r", "s"}
	content := func(file string) string { return randomManifest(rng, file, objNames) }
	applied := newChangeSets()
	for step := range 300 {
		f := files[rng.IntN(len(files))]
		switch op := rng.IntN(10); {
		case op < 5:
			h.write(f, content(f))
		case op < 7:
			_ = os.Remove(h.path(f))
		case op < 8:
			to := files[rng.IntN(len(files))]
			if strings.HasSuffix(to, ".json") == strings.HasSuffix(f, ".json") && os.Rename(h.path(f), h.path(to)) == nil {
				h.touch(to)
			}
		default:
			if _, err := os.Stat(h.path(f)); err == nil {
				h.touch(f)
			}
		}
		res, err := h.r.load(h.dir, h.log)
		must(t, err)
		applied.apply(t, step, res)
	}
	applied.checkUnmodified(t)
}

// changeSets applies the change sets of Results one after the other, as run does to its
// store, and checks that they add up to each Result's objects, pointer for pointer.
type changeSets struct {
	applied              map[objectKey]runtime.Object
	handedOut, snapshots []runtime.Object
}

func newChangeSets() *changeSets { return &changeSets{applied: map[objectKey]runtime.Object{}} }

func (s *changeSets) apply(t *testing.T, step int, res *Result) {
	t.Helper()
	for _, c := range res.Changes {
		if c.Old != nil {
			if s.applied[keyOf(c.Old)] != c.Old {
				t.Fatalf("step %d: change %v: the old version is not the one handed out", step, changes([]Change{c}))
			}
			delete(s.applied, keyOf(c.Old))
		}
		if c.New != nil {
			s.applied[keyOf(c.New)] = c.New
		}
	}
	if len(s.applied) != len(res.Objects) {
		t.Fatalf("step %d: the changes add up to %d objects, the Result has %v", step, len(s.applied), names(res.Objects))
	}
	for _, o := range res.Objects {
		if s.applied[keyOf(o)] != o {
			t.Fatalf("step %d: %s is not the object the changes add up to", step, names([]runtime.Object{o})[0])
		}
	}
	s.handedOut = append(s.handedOut, res.Objects...)
	s.snapshots = append(s.snapshots, deepCopies(res.Objects)...)
}

// checkUnmodified fails if an object handed out was modified since.
func (s *changeSets) checkUnmodified(t *testing.T) {
	t.Helper()
	checkUnmodified(t, s.handedOut, s.snapshots)
}

// randomManifest returns a random file of Services named from objNames, some of them
// broken, some defining one Service twice.
func randomManifest(rng *rand.Rand, file string, objNames []string) string {
	var docs []string
	svc := func(n string) {
		if strings.HasSuffix(file, ".json") {
			docs = append(docs, svcJSON(n, 1+rng.IntN(3)))
		} else {
			docs = append(docs, svcYAML(n, 1+rng.IntN(3)))
		}
	}
	for _, n := range objNames {
		if rng.IntN(3) == 0 {
			svc(n)
		}
	}
	if rng.IntN(8) == 0 {
		svc(objNames[rng.IntN(len(objNames))])
	}
	if rng.IntN(8) == 0 {
		docs = append(docs, "kind: [") // broken
	}
	if strings.HasSuffix(file, ".json") {
		return strings.Join(docs, "\n")
	}
	return strings.Join(docs, "---\n")
}
