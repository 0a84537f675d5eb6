package status

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/dag"
)

// logLines is a Logger writing to a buffer, and its lines since the last call.
type logLines struct {
	out bytes.Buffer
	l   *Logger
}

func newLogLines(seeAll func() string) *logLines {
	ll := &logLines{}
	ll.l = NewLogger(slog.New(slog.NewTextHandler(&ll.out, nil)), seeAll)
	return ll
}

func (ll *logLines) lines() []string {
	defer ll.out.Reset()
	s := strings.TrimSpace(ll.out.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func ingressStatus(name string, v dag.StatusValue, desc string) *dag.Status {
	return &dag.Status{Object: dag.ObjectRef{Kind: dag.KindIngress, Namespace: "default", Name: name}, Status: v, Description: desc}
}

// statusLines are the lines of lines that log an object's status.
func statusLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, " msg=status ") {
			out = append(out, l)
		}
	}
	return out
}

// TestLoggerLogsChangesOnly checks what a `portico run` user sees: each object's status
// once when it first appears (with a summary of the first build), again only when it
// changes, whatever order it comes in.
func TestLoggerLogsChangesOnly(t *testing.T) {
	ll := newLogLines(nil)
	st := ingressStatus

	ll.l.Observe([]*dag.Status{st("a", dag.StatusValid, "ok"), st("b", dag.StatusValid, "ok")})
	got := ll.lines()
	if len(got) != 3 || len(statusLines(got)) != 2 || !strings.Contains(got[2], `msg="status summary" objects=2 valid=2`) {
		t.Fatalf("first build: want both statuses and a summary, got %q", got)
	}
	ll.l.Observe([]*dag.Status{st("a", dag.StatusValid, "ok"), st("b", dag.StatusInvalid, "bad path"), st("c", dag.StatusValid, "ok")})
	got = ll.lines()
	if len(got) != 2 || !strings.Contains(got[0], "name=b") || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[1], "name=c") {
		t.Fatalf("want b's change and the new c logged, got %q", got)
	}
	// Unordered input (a caller other than a build) is handled the same.
	ll.l.Observe([]*dag.Status{st("c", dag.StatusValid, "ok"), st("b", dag.StatusInvalid, "bad path"), st("a", dag.StatusValid, "still ok")})
	if got := ll.lines(); len(got) != 1 || !strings.Contains(got[0], "name=a") {
		t.Fatalf("want only a's new description logged, got %q", got)
	}
	ll.l.Observe([]*dag.Status{st("a", dag.StatusValid, "still ok"), st("b", dag.StatusInvalid, "bad path"), st("c", dag.StatusValid, "ok")})
	if got := ll.lines(); len(got) != 0 {
		t.Fatalf("nothing changed, yet logged %q", got)
	}
}

// TestLoggerObserveTouched checks that comparing only the touched objects logs what
// Observe would for a build that changed only those, and an object touched twice (the
// two builds of LastValid) once.
func TestLoggerObserveTouched(t *testing.T) {
	ll := newLogLines(nil)
	ref := func(name string) dag.ObjectRef {
		return dag.ObjectRef{Kind: dag.KindIngress, Namespace: "default", Name: name}
	}
	st := func(name string, v dag.StatusValue) *dag.Status { return &dag.Status{Object: ref(name), Status: v} }
	ll.l.Observe([]*dag.Status{st("a", dag.StatusValid), st("b", dag.StatusValid)})
	ll.lines()
	ll.l.ObserveTouched([]*dag.Status{st("a", dag.StatusValid), st("b", dag.StatusInvalid), st("c", dag.StatusValid)},
		[]dag.ObjectRef{ref("c"), ref("b"), ref("gone"), ref("b")})
	got := ll.lines()
	if len(got) != 2 || !strings.Contains(got[0], "name=b") || !strings.Contains(got[1], "name=c") {
		t.Fatalf("want b's change and the new c, each once, got %q", got)
	}
	ll.l.ObserveTouched([]*dag.Status{st("a", dag.StatusValid), st("b", dag.StatusInvalid), st("c", dag.StatusValid)}, []dag.ObjectRef{ref("b")})
	if got := ll.lines(); len(got) != 0 {
		t.Fatalf("b did not change, yet logged %q", got)
	}
}

// TestLoggerLevels: what makes requests fail or leaves part of an object unserved is a
// WARN (invalid, orphaned, valid with remarks such as a missing Service); the rest INFO.
func TestLoggerLevels(t *testing.T) {
	noted := ingressStatus("noted", dag.StatusValid, "valid Ingress; Service default/web not found: its routes answer 503 until it exists")
	noted.Noted = true
	for _, tc := range []struct {
		s    *dag.Status
		want string
	}{
		{ingressStatus("fine", dag.StatusValid, "valid Ingress"), "level=INFO"},
		{noted, "level=WARN"},
		{ingressStatus("invalid", dag.StatusInvalid, "bad path"), "level=WARN"},
		{ingressStatus("orphaned", dag.StatusOrphaned, "not part of a delegation chain"), "level=WARN"},
		{ingressStatus("ignored", dag.StatusIgnored, "another class"), "level=INFO"},
	} {
		ll := newLogLines(nil)
		ll.l.Observe([]*dag.Status{tc.s})
		got := statusLines(ll.lines())
		if len(got) != 1 || !strings.Contains(got[0], tc.want) {
			t.Errorf("%s: want one line at %s, got %q", tc.s.Object.Name, tc.want, got)
		}
	}
}

// TestLoggerBoundsLinesPerBuild: at thousands of objects a build logs at most MaxLogged
// statuses, those needing attention first, and one summary with the counts and where to
// read every status; a small change afterwards is logged as it is.
func TestLoggerBoundsLinesPerBuild(t *testing.T) {
	const n, broken = 17588, 30
	ll := newLogLines(func() string { return "portico check DIR, or curl http://127.0.0.1:8090/statuses" })
	build := func(invalidEvery int, desc string) []*dag.Status {
		out := make([]*dag.Status, n)
		for i := range out {
			v := dag.StatusValid
			if i%invalidEvery == 0 {
				v = dag.StatusInvalid
			}
			out[i] = ingressStatus(fmt.Sprintf("app-%05d", i), v, desc)
		}
		return out
	}
	first := build(n/broken+1, "v1")
	ll.l.Observe(first)
	got := ll.lines()
	st := statusLines(got)
	if len(got) != MaxLogged+1 || len(st) != MaxLogged {
		t.Fatalf("first build of %d objects: %d lines (%d statuses), want %d statuses and a summary", n, len(got), len(st), MaxLogged)
	}
	for _, l := range st {
		if !strings.Contains(l, "status=invalid") {
			t.Fatalf("first build logged a valid object while invalid ones were left out: %q", l)
		}
	}
	summary := got[len(got)-1]
	for _, want := range []string{"level=WARN", `msg="status summary"`, fmt.Sprintf("objects=%d", n), fmt.Sprintf("valid=%d", n-broken),
		fmt.Sprintf("invalid=%d", broken), "logged=20", `see_all="portico check DIR, or curl http://127.0.0.1:8090/statuses"`} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %s", summary, want)
		}
	}

	// Every object's description changes: bounded again, with what changed.
	ll.l.Observe(build(n/broken+1, "v2"))
	got = ll.lines()
	if len(got) != MaxLogged+1 || !strings.Contains(got[len(got)-1], fmt.Sprintf("changed=%d", n)) {
		t.Fatalf("a change of every object: %d lines, want %d; summary %q", len(got), MaxLogged+1, got[len(got)-1])
	}

	// One object changes: its line alone.
	next := build(n/broken+1, "v2")
	next[7] = ingressStatus(next[7].Object.Name, dag.StatusOrphaned, "v3")
	ll.l.Observe(next)
	if got := ll.lines(); len(got) != 1 || !strings.Contains(got[0], "name=app-00007") {
		t.Fatalf("one change: want its line alone, got %q", got)
	}

	// Every valid object gains a remark, three turn orphaned, an invalid one changes: the
	// invalid one first, then the orphaned ones.
	worse := build(n/broken+1, "v2")
	for i, s := range worse {
		if s.Status == dag.StatusValid {
			noted := *s
			noted.Noted, noted.Description = true, "Service missing"
			worse[i] = &noted
		}
	}
	for i := 0; i < 3; i++ {
		worse[i*1000+1] = ingressStatus(worse[i*1000+1].Object.Name, dag.StatusOrphaned, "v3")
	}
	worse[n-1-(n-1)%(n/broken+1)] = ingressStatus(worse[n-1-(n-1)%(n/broken+1)].Object.Name, dag.StatusInvalid, "v3")
	ll.l.Observe(worse)
	st = statusLines(ll.lines())
	for i, l := range st {
		want := "status=valid"
		switch {
		case i == 0:
			want = "status=invalid"
		case i < 4:
			want = "status=orphaned"
		}
		if !strings.Contains(l, want) {
			t.Fatalf("line %d of a change to WARN everywhere: %q, want %s", i, l, want)
		}
	}
}
