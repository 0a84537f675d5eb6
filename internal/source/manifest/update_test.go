package manifest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Random sequences of file operations (edits, additions, removals, renames, broken
// files, objects defined in several files or twice in one): after each, a reader told
// only the names the operation touched (the names file system events carry) gives the
// same Result as a reader walking the whole directory: the same objects, ages included,
// in the same order, the same problems and the same changes in the same order; its
// change sets add up to its objects, and it never modifies an object handed out.
func TestReaderUpdateEqualsFullWalk(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testReaderUpdateEqualsFullWalk(t, seed) })
	}
}

func testReaderUpdateEqualsFullWalk(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(10, 4+seed))
	h := newReaderHarness(t, nil)
	clock := time.Now().Round(time.Second)
	now := func() time.Time { return clock }
	inc, full := newReader(now), newReader(now)
	// lean reads as inc does, for Changes and Problems only (WatchChanges).
	lean := newReader(now)
	lean.noObjects = true
	// "a", "a-b.yaml" and "a.yaml" sort differently as names than as paths.
	files := []string{"a.yaml", "a-b.yaml", "a/x.yaml", "a/y.json", "b.yml", "sub/c.yaml", "sub/deep/d.yaml", "z.json"}
	others := []string{"notes.txt", "a.yaml~", ".hidden.yaml", "sub/x.tmp"}
	dirs := []string{"a", "sub", "sub/deep"}
	objNames := []string{"p", "q", "r", "s", "t"}
	content := func(file string) string { return randomManifest(rng, file, objNames) }
	// touched lists name and the directories writing it creates, as events would.
	touched := func(name string) []string {
		var out []string
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			if _, err := os.Stat(h.path(d)); err != nil {
				out = append(out, d)
			}
		}
		return append(out, name)
	}
	exists := func(name string) bool { _, err := os.Lstat(h.path(name)); return err == nil }

	applied := newChangeSets()
	updated, walked := 0, 0
	for step := range 600 {
		clock = clock.Add(time.Second)
		f := files[rng.IntN(len(files))]
		var names []string
		switch op := rng.IntN(20); {
		case op < 8:
			names = touched(f)
			h.write(f, content(f))
		case op < 11:
			names = []string{f}
			_ = os.Remove(h.path(f))
		case op < 13:
			to := files[rng.IntN(len(files))]
			if exists(f) && strings.HasSuffix(to, ".json") == strings.HasSuffix(f, ".json") {
				names = append(touched(to), f)
				must(t, os.MkdirAll(filepath.Dir(h.path(to)), 0o755))
				must(t, os.Rename(h.path(f), h.path(to)))
			}
		case op < 14:
			if exists(f) {
				names = []string{f}
				h.touch(f)
			}
		case op < 15:
			o := others[rng.IntN(len(others))]
			names = touched(o)
			h.write(o, svcYAML("o", 1))
		case op < 16:
			d := dirs[rng.IntN(len(dirs))]
			names = []string{d}
			must(t, os.RemoveAll(h.path(d)))
		case op < 17:
			// A link to another manifest, or a link removed. Every change near a link
			// is a full walk, so links come and go.
			link := "l.yaml"
			switch {
			case exists(link):
				names = []string{link}
				must(t, os.Remove(h.path(link)))
			case rng.IntN(3) == 0:
				names = []string{link}
				must(t, os.Symlink(f, h.path(link)))
			}
		default:
			// Several at once, as a burst of events between two reloads.
			for range 3 {
				g := files[rng.IntN(len(files))]
				names = append(names, touched(g)...)
				h.write(g, content(g))
			}
		}
		paths := make([]string, len(names))
		for i, n := range names {
			paths[i] = h.path(n)
		}
		got, ok := inc.update(h.dir, paths, h.log)
		leanGot, leanOK := lean.update(h.dir, paths, h.log)
		if ok {
			updated++
		} else {
			walked++
			var err error
			got, err = inc.load(h.dir, h.log)
			must(t, err)
		}
		if !leanOK {
			var err error
			leanGot, err = lean.load(h.dir, h.log)
			must(t, err)
		}
		want, err := full.load(h.dir, h.log)
		must(t, err)
		if !equality.Semantic.DeepEqual(got.Objects, want.Objects) {
			t.Fatalf("step %d (%v, update %v): objects\n%v\nwant\n%v", step, names, ok, got.Objects, want.Objects)
		}
		if d := cmp.Diff(want.Problems, got.Problems); d != "" {
			t.Fatalf("step %d (%v, update %v): problems (-want +got):\n%s", step, names, ok, d)
		}
		if d := cmp.Diff(changes(want.Changes), changes(got.Changes)); d != "" {
			t.Fatalf("step %d (%v, update %v): changes (-want +got):\n%s", step, names, ok, d)
		}
		if d := cmp.Diff(changes(got.Changes), changes(leanGot.Changes)); d != "" || leanOK != ok || leanGot.Objects != nil {
			t.Fatalf("step %d (%v, update %v): without objects, update %v, %d objects, changes (-with +without):\n%s",
				step, names, ok, leanOK, len(leanGot.Objects), d)
		}
		if d := cmp.Diff(got.Problems, leanGot.Problems); d != "" {
			t.Fatalf("step %d (%v, update %v): problems without objects (-with +without):\n%s", step, names, ok, d)
		}
		applied.apply(t, step, got)
		checkSameBooks(t, step, inc, full)
	}
	applied.checkUnmodified(t)
	t.Logf("%d updates, %d full walks", updated, walked)
	if updated < 200 || walked == 0 {
		t.Errorf("%d updates and %d full walks: the operations no longer exercise both", updated, walked)
	}
}

func TestWalkOrder(t *testing.T) {
	// The order os.ReadDir and LoadDir's depth-first walk give.
	want := []string{"r", "r/a", "r/a/x.yaml", "r/a/y", "r/a/y/z.yaml", "r/a-b.yaml", "r/a.yaml", "r/b"}
	got := slices.Clone(want)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
	slices.SortFunc(got, walkOrder)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// checkSameBooks fails unless the two readers remember the same of every object: its
// age, where its definition in force is, and where it is defined more than once.
func checkSameBooks(t *testing.T, step int, got, want *reader) {
	t.Helper()
	type kept struct {
		At    time.Time
		File  string
		Index int
	}
	entries := func(r *reader) map[string]kept {
		out := map[string]kept{}
		for k, e := range r.book.entries {
			out[k.String()] = kept{e.at, e.file, e.index}
		}
		return out
	}
	if d := cmp.Diff(entries(want), entries(got)); d != "" {
		t.Fatalf("step %d: book (-want +got):\n%s", step, d)
	}
	if d := cmp.Diff(want.dups, got.dups, cmp.AllowUnexported(defRef{}, objectKey{}), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("step %d: definitions (-want +got):\n%s", step, d)
	}
}
