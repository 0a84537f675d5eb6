package runstate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/testutil"
)

// fixtures holds one object of each kind the manifests give, as decoded from files.
const fixtures = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, annotations: {portico.dev/retry-on: 5xx}}
spec:
  rules:
  - host: shop.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
---
apiVersion: networking.k8s.io/v1beta1
kind: IngressClass
metadata: {name: portico}
spec: {controller: portico.dev/ingress-controller}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: app, namespace: team-a}
spec:
  virtualhost: {fqdn: app.test, tls: {secretName: cert}}
  routes:
  - conditions: [{prefix: /api}]
    services: [{name: api, port: 80, weight: 90}, {name: api2, port: 80, weight: 10}]
    timeoutPolicy: {response: 5s}
  includes: [{name: child, namespace: team-b}]
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: legacy}
spec:
  virtualhost: {fqdn: legacy.test}
  routes: [{match: /, services: [{name: web, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Secret
metadata: {name: cert, namespace: team-a}
type: kubernetes.io/tls
stringData: {tls.crt: CERT, tls.key: KEY}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
ports: [{name: http, port: 8080}]
`

// objects decodes the fixtures and gives them distinct ages a nanosecond apart, as a
// load does, and returns them with their ages.
func objects(t *testing.T) ([]runtime.Object, map[manifest.Identity]time.Time) {
	t.Helper()
	objs, probs := manifest.Decode("fixtures.yaml", []byte(fixtures))
	if len(probs) != 0 {
		t.Fatalf("fixtures: %v", probs)
	}
	ages := map[manifest.Identity]time.Time{}
	base := time.Date(2026, 3, 1, 10, 0, 0, 123, time.UTC)
	for i, o := range objs {
		at := base.Add(time.Duration(i))
		acc, err := meta.Accessor(o)
		if err != nil {
			t.Fatal(err)
		}
		acc.SetCreationTimestamp(metav1.NewTime(at))
		ages[manifest.IdentityOf(o)] = at
	}
	return objs, ages
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func bufLog(b *testutil.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// What is written is read back as it was: ages to the nanosecond, by kind, namespace
// and name (a cluster-wide kind included); last good files with their paths under the
// manifest directory and the objects' places; last valid objects, with their ages.
func TestRoundTrip(t *testing.T) {
	objs, ages := objects(t)
	dir := filepath.Join(t.TempDir(), "manifests")
	path := filepath.Join(t.TempDir(), "state", "run.json")
	want := State{
		Ages: kept(ages),
		LastGood: []manifest.LastGoodFile{
			{Path: filepath.Join(dir, "team-a", "app.yaml"), Objects: []manifest.LastGoodObject{{Object: objs[2], Line: 3, Document: 2}, {Object: objs[5], Line: 20, Document: 3}}},
			{Path: filepath.Join(dir, "web.yaml"), Objects: []manifest.LastGoodObject{{Object: objs[4], Line: 1, Document: 1}, {Object: objs[6], Line: 9, Document: 2}}},
		},
		LastValid: []runtime.Object{objs[0], objs[2], objs[3]},
	}
	if err := Write(path, want, dir); err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	got := Load(path, dir, bufLog(&logs))
	// Objects whose ages are not kept come back with their creationTimestamp to the
	// second, as JSON has it: a load gives them new ages anyway.
	toSecond := func(o runtime.Object) runtime.Object {
		if aged(manifest.IdentityOf(o)) {
			return o
		}
		o = o.DeepCopyObject()
		acc, _ := meta.Accessor(o)
		acc.SetCreationTimestamp(metav1.NewTime(acc.GetCreationTimestamp().Truncate(time.Second)))
		return o
	}
	sameObject := cmp.Comparer(func(a, b runtime.Object) bool { return equality.Semantic.DeepEqual(toSecond(a), toSecond(b)) })
	if diff := cmp.Diff(want, got, sameObject); diff != "" {
		t.Errorf("read back (-written +read):\n%s", diff)
	}
	// Semantic equality takes times to the second: ages must be exact.
	for _, o := range got.LastValid {
		acc, _ := meta.Accessor(o)
		if at := acc.GetCreationTimestamp().Time; !at.Equal(ages[manifest.IdentityOf(o)]) {
			t.Errorf("%s: age %s, want %s", manifest.IdentityOf(o), at.Format(time.RFC3339Nano), ages[manifest.IdentityOf(o)].Format(time.RFC3339Nano))
		}
	}
	if !strings.Contains(logs.String(), "run state restored") {
		t.Errorf("no log line says the state was restored:\n%s", logs.String())
	}
	// Private: a last good version may hold a Secret.
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode: %v %v, want 0600", fi.Mode(), err)
	}
	// A copy of the tree elsewhere, pointed at the same file, reads its files there.
	moved := Load(path, "/elsewhere/manifests", quietLog())
	if p := moved.LastGood[1].Path; p != filepath.Join("/elsewhere/manifests", "web.yaml") {
		t.Errorf("last good file of a copy of the tree: %s", p)
	}
}

// A state file that cannot be used is reported with its path and why, moved aside for
// someone to look at, and the state starts empty; a missing one is a first start.
func TestLoadUnusable(t *testing.T) {
	objs, ages := objects(t)
	var good bytes.Buffer
	if err := encode(&good, State{Ages: ages, LastValid: objs[:1]}, "/m", time.Now()); err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) string {
		if !strings.Contains(good.String(), old) {
			t.Fatalf("%q is not in the file:\n%s", old, good.String())
		}
		return strings.Replace(good.String(), old, new, 1)
	}
	for _, tc := range []struct{ name, content, reason string }{
		{"empty", "", "not a state file"},
		{"garbage", "\x00\x01 not json", "not a state file"},
		{"truncated", good.String()[:good.Len()/2], "not a state file"},
		{"another format", `{"format": "something else", "version": 1}`, `something else`},
		{"newer version", replace(`"version":1`, `"version":2`), "written by a newer Portico (format version 2; this one reads 1)"},
		{"no version", replace(`"version":1,`, ``), "format version 0"},
		{"wrong type", replace(`"ages":{`, `"ages":{"Bogus": [1],`), "cannot unmarshal"},
		{"not an object", replace(`"lastValidObjects":[`, `"lastValidObjects":[{"apiVersion": "v1", "kind": "Nope", "metadata": {"name": "x"}},`), "unknown kind"},
		{"path outside", replace(`"ages"`, `"lastGoodFiles": [{"path": "../x.yaml", "objects": []}], "ages"`), `is not a path under the manifest directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "run.json")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs testutil.SyncBuffer
			st := Load(path, "/m", bufLog(&logs))
			if len(st.Ages) != 0 || st.LastGood != nil || st.LastValid != nil {
				t.Errorf("state from an unusable file: %+v", st)
			}
			line := logs.String()
			if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "state_file="+path) || !strings.Contains(line, tc.reason) {
				t.Errorf("the log does not say which file and why (%q):\n%s", tc.reason, line)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the unusable file is still in place: %v", err)
			}
			if b, err := os.ReadFile(path + ".bad"); err != nil || string(b) != tc.content {
				t.Errorf("the file was not moved aside whole: %v", err)
			}
		})
	}

	var logs testutil.SyncBuffer
	missing := filepath.Join(t.TempDir(), "none.json")
	if st := Load(missing, "/m", bufLog(&logs)); st.Ages != nil {
		t.Errorf("missing file: %+v", st)
	}
	if !strings.Contains(logs.String(), "no run state saved yet") || strings.Contains(logs.String(), "WARN") {
		t.Errorf("missing file, logs:\n%s", logs.String())
	}
}

// A write that fails half-way leaves the previous file as it was and no temporary file.
func TestWriteAtomicFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.json")
	if err := writeAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "previous"); return err }); err != nil {
		t.Fatal(err)
	}
	failure := errors.New("disk full")
	err := writeAtomic(path, func(w io.Writer) error {
		if _, err := w.Write(bytes.Repeat([]byte("x"), 1<<20)); err != nil {
			return err
		}
		return failure
	})
	if !errors.Is(err, failure) {
		t.Fatalf("writeAtomic: %v, want the write's error", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "previous" {
		t.Errorf("after a failed write the file holds %q (%v), want the previous one", b, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("files left: %v, want run.json alone", names)
	}
}

// Readers of the file while it is rewritten again and again always find a whole state.
func TestWriteAtomicReaders(t *testing.T) {
	objs, ages := objects(t)
	path := filepath.Join(t.TempDir(), "run.json")
	st := State{Ages: ages, LastValid: objs[:3]}
	if err := Write(path, st, "/m"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range 40 {
			// Sizes vary, so that a partial file would show.
			st.LastValid = objs[:1+i%3]
			if err := Write(path, st, "/m"); err != nil {
				t.Error(err)
				return
			}
		}
	})
	reads := 0
	for stop := false; !stop; reads++ {
		select {
		case <-done:
			stop = true
		default:
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decode(data, "/m"); err != nil {
			t.Fatalf("read %d found a partial file: %v", reads, err)
		}
	}
	wg.Wait()
}

func TestDefaultPath(t *testing.T) {
	home, state := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", state)
	cwd := t.TempDir()
	t.Chdir(cwd)
	must := func(p string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := must(DefaultPath("shop manifests"))
	if dir, name := filepath.Split(p); dir != filepath.Join(state, "portico", "run")+"/" || !strings.HasPrefix(name, "shop_manifests-") || !strings.HasSuffix(name, ".json") {
		t.Errorf("default path %s, want %s/portico/run/shop_manifests-HASH.json", p, state)
	}
	for _, same := range []string{filepath.Join(cwd, "shop manifests"), "./shop manifests/", "x/../shop manifests"} {
		if q := must(DefaultPath(same)); q != p {
			t.Errorf("DefaultPath(%q) = %s, want %s as for the same directory", same, q, p)
		}
	}
	if q := must(DefaultPath("other/shop manifests")); q == p {
		t.Errorf("two directories share the state file %s", q)
	}
	t.Setenv("XDG_STATE_HOME", "relative") // ignored, as the XDG specification says
	if q := must(DefaultPath("shop manifests")); !strings.HasPrefix(q, filepath.Join(home, ".local", "state", "portico", "run")+"/") {
		t.Errorf("without XDG_STATE_HOME: %s, want under ~/.local/state/portico/run", q)
	}
}

// change makes the changes of a reload that adds objs.
func added(objs ...runtime.Object) []manifest.Change {
	cs := make([]manifest.Change, len(objs))
	for i, o := range objs {
		cs[i] = manifest.Change{New: o}
	}
	return cs
}

// Notes are coalesced: many reloads noted while a write waits make one write, and a
// reload that changed nothing, or only edited objects, makes none. The file holds the ages of the objects
// present: an update keeps the age, a removal drops it.
func TestSaverCoalesces(t *testing.T) {
	objs, ages := objects(t)
	path := filepath.Join(t.TempDir(), "run.json")
	s := NewSaver(path, "/m", quietLog())
	s.HoldOff, s.MaxDelay = time.Hour, time.Hour // Run never writes on its own here
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { s.Run(ctx); close(ran) }()
	for _, o := range objs {
		s.Note(added(o), nil, nil)
	}
	updated := objs[4].DeepCopyObject()
	for range 1000 {
		s.Note([]manifest.Change{{Old: objs[4], New: updated}}, nil, nil)
	}
	s.Note([]manifest.Change{{Old: objs[6]}}, nil, nil)
	cancel()
	<-ran
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("written before the hold-off: %v", err)
	}
	s.Flush()
	// Neither a reload that changed nothing nor an edit changes what the file holds.
	s.Note(nil, nil, nil)
	s.Note([]manifest.Change{{Old: updated, New: objs[4]}}, nil, nil)
	s.Flush()
	if s.writes != 1 {
		t.Errorf("%d writes for 1,010 notes, want 1", s.writes)
	}
	got := Load(path, "/m", quietLog())
	delete(ages, manifest.IdentityOf(objs[6]))
	if diff := cmp.Diff(kept(ages), got.Ages); diff != "" {
		t.Errorf("ages (-want +got):\n%s", diff)
	}
}

// Run writes once notes stop coming for the hold-off; what is noted while Run is not
// running waits for Flush. A write that fails is reported once, and again when it works.
func TestSaverRun(t *testing.T) {
	objs, ages := objects(t)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	path := filepath.Join(blocker, "run.json") // its directory is a file: writes fail
	s := NewSaver(path, "/m", bufLog(&logs))
	s.HoldOff = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	lastValid := []runtime.Object{objs[0]}
	s.Note(added(objs...), nil, lastValid)
	waitFor(t, "the failure to be logged", func() bool { return strings.Contains(logs.String(), "cannot save the run state") })
	s.Note(nil, nil, []runtime.Object{objs[2]})
	waitFor(t, "a second attempt", func() bool { return s.failuresNow() >= 2 })
	if n := strings.Count(logs.String(), "cannot save the run state"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs.String())
	}
	s.path = filepath.Join(dir, "run.json") // as if the directory had been fixed
	s.Flush()
	if !strings.Contains(logs.String(), "run state saved again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
	got := Load(s.path, "/m", quietLog())
	if len(got.Ages) != len(kept(ages)) || len(got.LastValid) != 1 || manifest.IdentityOf(got.LastValid[0]) != manifest.IdentityOf(objs[2]) {
		t.Errorf("after recovery: %d ages, last valid %v", len(got.Ages), got.LastValid)
	}
}

func (s *Saver) failuresNow() int {
	s.write.Lock()
	defer s.write.Unlock()
	return s.failures
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The file is JSON a person can read: kinds as kubectl names them, then namespaces and
// names. Services, Endpoints, EndpointSlices and Secrets, whose ages decide nothing, are
// left out.
func TestFileLayout(t *testing.T) {
	_, ages := objects(t)
	var b bytes.Buffer
	if err := encode(&b, State{Ages: ages}, "/m", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"format": "portico run state", "version": 1.0, "manifests": "/m", "written": "2026-03-01T00:00:00Z",
		"ages": map[string]any{
			"Ingress.networking.k8s.io":       map[string]any{"default": map[string]any{"shop": "2026-03-01T10:00:00.000000123Z"}},
			"IngressClass.networking.k8s.io":  map[string]any{"": map[string]any{"portico": "2026-03-01T10:00:00.000000124Z"}},
			"HTTPProxy.projectcontour.io":     map[string]any{"team-a": map[string]any{"app": "2026-03-01T10:00:00.000000125Z"}},
			"IngressRoute.contour.heptio.com": map[string]any{"default": map[string]any{"legacy": "2026-03-01T10:00:00.000000126Z"}},
		},
	}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
}

// kept returns the ages a state file keeps of ages.
func kept(ages map[manifest.Identity]time.Time) map[manifest.Identity]time.Time {
	out := map[manifest.Identity]time.Time{}
	for id, at := range ages {
		if aged(id) {
			out[id] = at
		}
	}
	return out
}

// Run mode does not hold names to Kubernetes' rules: a name with control characters,
// quotes, backslashes or any other character must not make the state file unreadable
// (which would cost every object its age and last good version).
func TestOddNamesRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 5, time.UTC)
	ages := map[manifest.Identity]time.Time{}
	for i, name := range []string{"bad\aname", "nul\x00x", `quo"te`, `back\slash`, "tab\tand\nnewline", "del\x7f", "tag\U000e0001", "ünïcödé", "plain"} {
		ages[manifest.Identity{Group: "projectcontour.io", Kind: "HTTPProxy", Namespace: "ns\v\"x", Name: name}] = at.Add(time.Duration(i))
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := Write(path, State{Ages: ages}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	got := Load(path, t.TempDir(), bufLog(&logs))
	if diff := cmp.Diff(ages, got.Ages); diff != "" {
		t.Errorf("ages read back (-written +read):\n%s\nlog:\n%s", diff, logs.String())
	}
}

// A field a later version adds does not make this version throw the state away.
func TestUnknownFieldsAreIgnored(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	id := manifest.Identity{Group: "projectcontour.io", Kind: "HTTPProxy", Namespace: "a", Name: "b"}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := Write(path, State{Ages: map[manifest.Identity]time.Time{id: at}}, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"ages"`), []byte(`"addedLater": {"x": 1}, "ages"`), 1)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := Load(path, t.TempDir(), quietLog()); !got.Ages[id].Equal(at) {
		t.Fatalf("ages %v after a field this version does not know was added", got.Ages)
	}
}
