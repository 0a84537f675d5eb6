package manifest

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// within bounds how long a test waits for a change to be seen. The package promises
// well under a second with the default debounce, but these tests check what is seen,
// not how fast: on a loaded two-core machine running the whole suite under -race a
// one-second deadline flakes, so the bound is generous.
const within = 10 * time.Second

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

type watchHarness struct {
	t       *testing.T
	results chan *Result
	last    *Result
}

// startWatch runs Watch on dir, with its default debounce, until the test ends.
func startWatch(t *testing.T, dir string) *watchHarness {
	t.Helper()
	return startWatchDebounce(t, dir, 0)
}

// startWatchDebounce runs Watch on dir with debounce until the test ends.
func startWatchDebounce(t *testing.T, dir string, debounce time.Duration) *watchHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &watchHarness{t: t, results: make(chan *Result, 1000)}
	done := make(chan error, 1)
	logger := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	go func() {
		done <- Watch(ctx, dir, debounce, logger, func(r *Result) { h.results <- r })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Watch returned %v after cancel", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Watch did not return after cancel")
		}
	})
	return h
}

// waitFor waits until a Result satisfying ok arrives, at most d after start.
func (h *watchHarness) waitFor(what string, start time.Time, d time.Duration, ok func(*Result) bool) *Result {
	h.t.Helper()
	timeout := time.NewTimer(time.Until(start.Add(d)))
	defer timeout.Stop()
	for {
		select {
		case r := <-h.results:
			h.last = r
			if ok(r) {
				h.t.Logf("%s: seen after %v", what, time.Since(start).Round(time.Millisecond))
				return r
			}
		case <-timeout.C:
			got := "no result"
			if h.last != nil {
				got = strings.Join(names(h.last.Objects), ", ")
			}
			h.t.Fatalf("%s: not seen within %v (last: %s)", what, d, got)
			return nil
		}
	}
}

// change runs op and waits for a Result satisfying ok within the deadline.
func (h *watchHarness) change(what string, op func(), ok func(*Result) bool) *Result {
	h.t.Helper()
	start := time.Now()
	op()
	return h.waitFor(what, start, within, ok)
}

func hasNames(want ...string) func(*Result) bool {
	return func(r *Result) bool {
		got := names(r.Objects)
		for i := range got {
			got[i] = strings.TrimPrefix(got[i], "Service default/")
		}
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		return slices.Equal(got, w)
	}
}

func servicePort(name string, port int32) func(*Result) bool {
	return func(r *Result) bool {
		for _, o := range r.Objects {
			if s, ok := o.(*corev1.Service); ok && s.Name == name && len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port == port {
				return true
			}
		}
		return false
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1)})
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, hasNames("a"))

	write := func(name, content string) func() {
		return func() { writeFiles(t, dir, map[string]string{name: content}) }
	}
	p := func(name string) string { return filepath.Join(dir, name) }

	h.change("create file", write("b.yaml", svcYAML("b", 1)), hasNames("a", "b"))
	h.change("modify file", write("a.yaml", svcYAML("a", 2)), servicePort("a", 2))
	h.change("replace by rename", func() {
		must(t, os.WriteFile(p(".a.yaml.tmp"), []byte(svcYAML("a", 3)), 0o644))
		must(t, os.Rename(p(".a.yaml.tmp"), p("a.yaml")))
	}, servicePort("a", 3))
	h.change("vim-style save (rename to backup, write new)", func() {
		must(t, os.Rename(p("a.yaml"), p("a.yaml~")))
		must(t, os.WriteFile(p("a.yaml"), []byte(svcYAML("a", 4)), 0o644))
		must(t, os.Remove(p("a.yaml~")))
	}, servicePort("a", 4))
	h.change("delete file", func() { must(t, os.Remove(p("b.yaml"))) }, hasNames("a"))
	h.change("create subdirectory with a file", write("sub/c.yaml", svcYAML("c", 1)), hasNames("a", "c"))
	h.change("modify file in new subdirectory", write("sub/c.yaml", svcYAML("c", 2)), servicePort("c", 2))
	h.change("create nested subdirectories", write("sub/x/y/d.json", svcJSON("d", 1)), hasNames("a", "c", "d"))
	h.change("modify file in nested subdirectory", write("sub/x/y/d.json", svcJSON("d", 2)), servicePort("d", 2))
	h.change("rename subdirectory", func() { must(t, os.Rename(p("sub/x"), p("sub/z"))) }, hasNames("a", "c", "d"))
	h.change("modify file in renamed subdirectory", write("sub/z/y/d.json", svcJSON("d", 3)), servicePort("d", 3))
	h.change("remove subdirectory", func() { must(t, os.RemoveAll(p("sub"))) }, hasNames("a"))
	h.change("re-create subdirectory", write("sub/c.yaml", svcYAML("c", 5)), servicePort("c", 5))
	h.change("broken file is a problem", write("bad.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec: {prots: []}\n"),
		func(r *Result) bool { return len(r.Problems) == 1 && len(r.Objects) == 2 })
	h.change("fixed file", write("bad.yaml", svcYAML("bad", 1)),
		func(r *Result) bool { return len(r.Problems) == 0 && len(r.Objects) == 3 })
}

func TestWatchCoalescesBursts(t *testing.T) {
	dir := t.TempDir()
	// What is checked is that a burst is coalesced, not how long the default window is:
	// a wide one keeps a loaded machine, writing the files slowly, from splitting it.
	h := startWatchDebounce(t, dir, 100*time.Millisecond)
	h.waitFor("initial load", time.Now(), within, hasNames())

	start := time.Now()
	var want []string
	for i := range 30 {
		name := "s" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		want = append(want, name)
		writeFiles(t, dir, map[string]string{name + ".yaml": svcYAML(name, 80)})
	}
	h.waitFor("burst", start, within, hasNames(want...))
	// Let anything still pending arrive, then count.
	time.Sleep(300 * time.Millisecond)
	calls := 1 + len(h.results)
	if calls > 3 {
		t.Errorf("30 writes caused %d reloads, want them coalesced", calls)
	}
}

func TestWatchIgnoresEditorScratchFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1)})
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, hasNames("a"))
	writeFiles(t, dir, map[string]string{".a.yaml.swp": "x", "a.yaml~": "x", ".#a.yaml": "x", "4913": ""})
	must(t, os.Chmod(filepath.Join(dir, "a.yaml"), 0o600))
	select {
	case r := <-h.results:
		t.Errorf("unexpected reload: %v", names(r.Objects))
	case <-time.After(400 * time.Millisecond):
	}
}

func TestWatchDirectoryRemovedAndRecreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1)})
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, hasNames("a"))

	must(t, os.RemoveAll(dir))
	select {
	case r := <-h.results:
		t.Fatalf("directory removed: got a Result %v, want the last one kept", names(r.Objects))
	case <-time.After(700 * time.Millisecond):
	}
	start := time.Now()
	writeFiles(t, dir, map[string]string{"b.yaml": svcYAML("b", 1)})
	// Noticed by polling the directory itself: allow one poll interval more.
	h.waitFor("re-created directory", start, within+rootPollInterval, hasNames("b"))
	h.change("watching the new directory", func() {
		writeFiles(t, dir, map[string]string{"c.yaml": svcYAML("c", 1)})
	}, hasNames("b", "c"))
}

func TestWatchSymlinkedRootSwap(t *testing.T) {
	base := t.TempDir()
	writeFiles(t, base, map[string]string{"v1/a.yaml": svcYAML("a", 1), "v2/b.yaml": svcYAML("b", 1)})
	link := filepath.Join(base, "current")
	must(t, os.Symlink("v1", link))
	h := startWatch(t, link)
	h.waitFor("initial load", time.Now(), within, hasNames("a"))

	start := time.Now()
	must(t, os.Symlink("v2", link+".tmp"))
	must(t, os.Rename(link+".tmp", link))
	h.waitFor("symlink swapped", start, within+rootPollInterval, hasNames("b"))
	h.change("watching the new target", func() {
		writeFiles(t, base, map[string]string{"v2/c.yaml": svcYAML("c", 1)})
	}, hasNames("b", "c"))
}

// Kubernetes ConfigMap volumes: files are links through ..data, which is
// swapped atomically to a new hidden directory on update.
func TestWatchConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"..v1/a.yaml": svcYAML("a", 1)})
	must(t, os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(t, os.Symlink(filepath.Join("..data", "a.yaml"), filepath.Join(dir, "a.yaml")))
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, servicePort("a", 1))

	h.change("ConfigMap update", func() {
		writeFiles(t, dir, map[string]string{"..v2/a.yaml": svcYAML("a", 2)})
		must(t, os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
		must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		must(t, os.RemoveAll(filepath.Join(dir, "..v1")))
	}, servicePort("a", 2))
}

func TestWatchMissingDirectory(t *testing.T) {
	called := false
	err := Watch(context.Background(), filepath.Join(t.TempDir(), "missing"), 0, nil, func(*Result) { called = true })
	if err == nil {
		t.Error("Watch on a missing directory: no error")
	}
	if called {
		t.Error("onChange called")
	}
}

// TestWatchKeepsLastGoodVersionOfABrokenFile: an edit that breaks a file keeps the
// file's previous objects (with a problem saying so); fixing or deleting it takes effect.
func TestWatchKeepsLastGoodVersionOfABrokenFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1), "b.yaml": svcYAML("b", 1)})
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, hasNames("a", "b"))
	write := func(name, content string) func() {
		return func() { writeFiles(t, dir, map[string]string{name: content}) }
	}
	keptWithProblem := func(r *Result) bool {
		for _, p := range r.Problems {
			if strings.HasSuffix(p.File, "a.yaml") && strings.Contains(p.Reason, "last good version (1 objects)") {
				return hasNames("a", "b")(r) && servicePort("a", 1)(r)
			}
		}
		return false
	}
	h.change("break a.yaml", write("a.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: a\n"), keptWithProblem)
	h.change("fix a.yaml", write("a.yaml", svcYAML("a", 2)), func(r *Result) bool { return len(r.Problems) == 0 && servicePort("a", 2)(r) })
	h.change("break again", write("a.yaml", "kind: ["), func(r *Result) bool { return len(r.Problems) == 2 && servicePort("a", 2)(r) })
	h.change("delete a.yaml", func() { must(t, os.Remove(filepath.Join(dir, "a.yaml"))) }, func(r *Result) bool {
		return len(r.Problems) == 0 && hasNames("b")(r)
	})
	// A file that was never good contributes what it can and reports its problems.
	res, err := LoadDir(dir)
	must(t, err)
	if len(res.Problems) != 0 {
		t.Errorf("LoadDir problems: %v", res.Problems)
	}
}

// A manifest that is a symbolic link to a file in another directory: edits to the
// target are applied however the editor saves, and so is pointing the link elsewhere;
// other files next to the target do not cause reloads.
func TestWatchSymlinkToFileElsewhere(t *testing.T) {
	dir, other, third := t.TempDir(), t.TempDir(), t.TempDir()
	target := filepath.Join(other, "a.yaml")
	writeFiles(t, other, map[string]string{"a.yaml": svcYAML("a", 1)})
	must(t, os.Symlink(target, filepath.Join(dir, "a.yaml")))
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, servicePort("a", 1))

	h.change("target written in place", func() {
		must(t, os.WriteFile(target, []byte(svcYAML("a", 2)), 0o644))
	}, servicePort("a", 2))
	h.change("target replaced by rename", func() {
		must(t, os.WriteFile(filepath.Join(other, ".a.yaml.new"), []byte(svcYAML("a", 3)), 0o644))
		must(t, os.Rename(filepath.Join(other, ".a.yaml.new"), target))
	}, servicePort("a", 3))

	writeFiles(t, other, map[string]string{"unrelated.yaml": svcYAML("u", 1), "notes.txt": "x"})
	select {
	case r := <-h.results:
		t.Errorf("a file next to the target caused a reload: %v", names(r.Objects))
	case <-time.After(400 * time.Millisecond):
	}

	// Like any file that cannot be read any more, its last good version stays.
	h.change("target removed", func() { must(t, os.Remove(target)) }, func(r *Result) bool {
		return len(r.Problems) == 2 && strings.Contains(r.Problems[0].Reason, "cannot read") && servicePort("a", 3)(r)
	})
	h.change("target back", func() {
		must(t, os.WriteFile(target, []byte(svcYAML("a", 4)), 0o644))
	}, func(r *Result) bool { return len(r.Problems) == 0 && servicePort("a", 4)(r) })

	h.change("link pointed at a file in a third directory", func() {
		writeFiles(t, third, map[string]string{"b.yaml": svcYAML("a", 5)})
		must(t, os.Symlink(filepath.Join(third, "b.yaml"), filepath.Join(dir, ".a.yaml.tmp")))
		must(t, os.Rename(filepath.Join(dir, ".a.yaml.tmp"), filepath.Join(dir, "a.yaml")))
	}, servicePort("a", 5))
	h.change("new target edited", func() {
		must(t, os.WriteFile(filepath.Join(third, "b.yaml"), []byte(svcYAML("a", 6)), 0o644))
	}, servicePort("a", 6))
	// The old target no longer matters.
	must(t, os.WriteFile(target, []byte(svcYAML("a", 7)), 0o644))
	select {
	case r := <-h.results:
		t.Errorf("editing the old target caused a reload: %v", names(r.Objects))
	case <-time.After(400 * time.Millisecond):
	}
}

// A link into a ConfigMap volume mounted elsewhere: the volume's files are links
// through ..data, which is swapped to a new directory on update.
func TestWatchSymlinkIntoConfigMapVolumeElsewhere(t *testing.T) {
	dir, vol := t.TempDir(), t.TempDir()
	writeFiles(t, vol, map[string]string{"..v1/a.yaml": svcYAML("a", 1)})
	must(t, os.Symlink("..v1", filepath.Join(vol, "..data")))
	must(t, os.Symlink(filepath.Join("..data", "a.yaml"), filepath.Join(vol, "a.yaml")))
	must(t, os.Symlink(filepath.Join(vol, "a.yaml"), filepath.Join(dir, "a.yaml")))
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, servicePort("a", 1))

	h.change("ConfigMap update", func() {
		writeFiles(t, vol, map[string]string{"..v2/a.yaml": svcYAML("a", 2)})
		must(t, os.Symlink("..v2", filepath.Join(vol, "..data_tmp")))
		must(t, os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")))
		must(t, os.RemoveAll(filepath.Join(vol, "..v1")))
	}, servicePort("a", 2))
	h.change("second update", func() {
		writeFiles(t, vol, map[string]string{"..v3/a.yaml": svcYAML("a", 3)})
		must(t, os.Symlink("..v3", filepath.Join(vol, "..data_tmp")))
		must(t, os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")))
		must(t, os.RemoveAll(filepath.Join(vol, "..v2")))
	}, servicePort("a", 3))
}

// A file that grows over MaxFileSize is refused, and its last good version keeps
// serving.
func TestWatchKeepsLastGoodVersionOfAHugeFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": svcYAML("a", 1)})
	h := startWatch(t, dir)
	h.waitFor("initial load", time.Now(), within, servicePort("a", 1))
	r := h.change("grown past the limit", func() {
		must(t, os.Truncate(filepath.Join(dir, "a.yaml"), MaxFileSize+1))
	}, func(r *Result) bool { return len(r.Problems) == 2 })
	if !servicePort("a", 1)(r) || !strings.Contains(r.Problems[0].Reason, "split it into smaller files") {
		t.Errorf("objects %v, problems %v", names(r.Objects), r.Problems)
	}
}

func TestLinkPath(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"vol/..v1/a.yaml": ""})
	must(t, os.Symlink("..v1", filepath.Join(dir, "vol", "..data")))
	must(t, os.Symlink("..data/a.yaml", filepath.Join(dir, "vol", "a.yaml")))
	must(t, os.Symlink(filepath.Join(dir, "vol", "a.yaml"), filepath.Join(dir, "link.yaml")))
	must(t, os.Symlink("loop2.yaml", filepath.Join(dir, "loop1.yaml")))
	must(t, os.Symlink("loop1.yaml", filepath.Join(dir, "loop2.yaml")))
	must(t, os.Symlink("missing/x.yaml", filepath.Join(dir, "dangling.yaml")))
	real, err := filepath.EvalSymlinks(dir)
	must(t, err)
	p := func(s string) string { return filepath.Join(real, s) }

	want := []string{p("link.yaml"), p("vol/a.yaml"), p("vol/..data"), p("vol/..v1/a.yaml")}
	if diff := cmp.Diff(want, linkPath(filepath.Join(dir, "link.yaml"))); diff != "" {
		t.Errorf("chain (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{p("dangling.yaml"), p("missing")}, linkPath(filepath.Join(dir, "dangling.yaml"))); diff != "" {
		t.Errorf("dangling (-want +got):\n%s", diff)
	}
	if got := linkPath(filepath.Join(dir, "loop1.yaml")); len(got) != maxLinkHops {
		t.Errorf("loop: %d paths, want it cut at %d", len(got), maxLinkHops)
	}
}
