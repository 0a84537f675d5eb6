package manifest

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/portico-dev/portico/internal/parallel"
)

// A tree of more files than parallel.MinItems is read and decoded on every core; the
// Results, first load and reload alike, are those of a load on one core: the same
// objects in the same order, the same problems (bad files, an object in two files
// named by the files in reading order), the same change sets.
func TestParallelLoadEqualsSequential(t *testing.T) {
	const files = 3 * parallel.MinItems
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	contents := map[string]string{}
	for i := range files {
		name := fmt.Sprintf("team-%d/app-%d.yaml", i%7, i)
		switch {
		case i%97 == 0:
			contents[name] = "kind: Service\nmetadata: {name: [unclosed\n"
		case i%89 == 0:
			contents[name] = svcYAML("shared", 80+i) // one object in several files
		default:
			contents[name] = benchFile(i, 2, 80)
		}
	}
	contents["team-0/notes.txt"] = "not a manifest"
	writeFiles(t, dir, contents)
	for name := range contents {
		must(t, os.Chtimes(filepath.Join(dir, name), old, old))
	}

	load := func(procs int, edit func()) []*Result {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		r := newReader(func() time.Time { return old.Add(2 * time.Hour) })
		first, err := r.load(dir, slog.New(slog.DiscardHandler))
		must(t, err)
		edit()
		second, err := r.load(dir, slog.New(slog.DiscardHandler))
		must(t, err)
		return []*Result{first, second}
	}
	noEdit := func() {}
	sequential := load(1, noEdit)
	if len(sequential[0].Problems) == 0 || len(sequential[0].Objects) < files {
		t.Fatalf("the tree gives %d objects and %d problems: not the mix the test needs", len(sequential[0].Objects), len(sequential[0].Problems))
	}
	parallelLoads := load(4, noEdit)
	for i, what := range []string{"first load", "reload"} {
		compareResults(t, what, parallelLoads[i], sequential[i])
	}

	// An edit, a new file and a removal between the two loads, on one core then on four.
	step := 0
	edit := func() {
		step++
		writeFiles(t, dir, map[string]string{
			"team-1/app-1.yaml":                     benchFile(1, 2, 1000+step),
			fmt.Sprintf("team-2/new-%d.yaml", step): svcYAML(fmt.Sprintf("new-%d", step), 81),
		})
		must(t, os.Remove(filepath.Join(dir, fmt.Sprintf("team-3/app-%d.yaml", 3+7*step))))
	}
	sequential = load(1, edit)
	// The same operations again, from the tree as it was.
	must(t, os.Remove(filepath.Join(dir, "team-2/new-1.yaml")))
	for _, name := range []string{"team-1/app-1.yaml", "team-3/app-10.yaml"} {
		writeFiles(t, dir, map[string]string{name: contents[name]})
		must(t, os.Chtimes(filepath.Join(dir, name), old, old))
	}
	step = 0
	parallelLoads = load(4, edit)
	compareResults(t, "reload after changes", parallelLoads[1], sequential[1])
	if len(parallelLoads[1].Changes) == 0 {
		t.Error("the reload after changes has no changes")
	}
}

func compareResults(t *testing.T, what string, got, want *Result) {
	t.Helper()
	if diff := cmp.Diff(want.Problems, got.Problems); diff != "" {
		t.Errorf("%s: problems on four cores differ from one (-one +four):\n%s", what, diff)
	}
	if diff := cmp.Diff(names(want.Objects), names(got.Objects)); diff != "" {
		t.Fatalf("%s: objects on four cores differ from one (-one +four):\n%s", what, diff)
	}
	for i := range want.Objects {
		if !equality.Semantic.DeepEqual(want.Objects[i], got.Objects[i]) {
			t.Errorf("%s: %s differs between one core and four", what, names(want.Objects[i : i+1])[0])
		}
	}
	if len(got.Changes) != len(want.Changes) {
		t.Errorf("%s: %d changes on four cores, %d on one", what, len(got.Changes), len(want.Changes))
	}
}

// BenchmarkLoad is the first load of 10,000 files of two objects each, the bulk of
// `portico run`'s start at that size.
func BenchmarkLoad(b *testing.B) {
	dir := benchTree(b, 10000, 2)
	log := slog.New(slog.DiscardHandler)
	for b.Loop() {
		if _, err := newReader(time.Now).load(dir, log); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadRemembered is BenchmarkLoad after a restart of `portico run`: every
// object's age comes from the memory kept in its state file.
func BenchmarkLoadRemembered(b *testing.B) {
	dir := benchTree(b, 10000, 2)
	log := slog.New(slog.DiscardHandler)
	first, err := newReader(time.Now).load(dir, log)
	must(b, err)
	mem := Memory{Ages: map[Identity]time.Time{}}
	for _, o := range first.Objects {
		acc, err := meta.Accessor(o)
		must(b, err)
		mem.Ages[IdentityOf(o)] = acc.GetCreationTimestamp().Time
	}
	for b.Loop() {
		r := newReader(time.Now)
		r.remember(mem)
		if _, err := r.load(dir, log); err != nil {
			b.Fatal(err)
		}
	}
}
