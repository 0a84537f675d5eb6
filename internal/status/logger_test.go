package status

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/dag"
)

// TestLoggerLogsChangesOnly checks what a `portico run` user sees: each object's status
// once when it first appears, again only when it changes, whatever order it comes in.
func TestLoggerLogsChangesOnly(t *testing.T) {
	var out bytes.Buffer
	l := NewLogger(slog.New(slog.NewTextHandler(&out, nil)))
	st := func(name string, v dag.StatusValue, desc string) *dag.Status {
		return &dag.Status{Object: dag.ObjectRef{Kind: dag.KindIngress, Namespace: "default", Name: name}, Status: v, Description: desc}
	}
	lines := func() []string {
		defer out.Reset()
		return strings.Split(strings.TrimSpace(out.String()), "\n")
	}

	l.Observe([]*dag.Status{st("a", dag.StatusValid, "ok"), st("b", dag.StatusValid, "ok")})
	if got := lines(); len(got) != 2 {
		t.Fatalf("first build: want both statuses logged, got %q", got)
	}
	l.Observe([]*dag.Status{st("a", dag.StatusValid, "ok"), st("b", dag.StatusInvalid, "bad path"), st("c", dag.StatusValid, "ok")})
	got := lines()
	if len(got) != 2 || !strings.Contains(got[0], "name=b") || !strings.Contains(got[0], "level=WARN") || !strings.Contains(got[1], "name=c") {
		t.Fatalf("want b's change and the new c logged, got %q", got)
	}
	// Unordered input (a caller other than a build) is handled the same.
	l.Observe([]*dag.Status{st("c", dag.StatusValid, "ok"), st("b", dag.StatusInvalid, "bad path"), st("a", dag.StatusValid, "still ok")})
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "name=a") {
		t.Fatalf("want only a's new description logged, got %q", got)
	}
	l.Observe([]*dag.Status{st("a", dag.StatusValid, "still ok"), st("b", dag.StatusInvalid, "bad path"), st("c", dag.StatusValid, "ok")})
	if out.Len() != 0 {
		t.Fatalf("nothing changed, yet logged %q", out.String())
	}
}

// TestLoggerObserveTouched checks that comparing only the touched objects logs what
// Observe would for a build that changed only those.
func TestLoggerObserveTouched(t *testing.T) {
	var out bytes.Buffer
	l := NewLogger(slog.New(slog.NewTextHandler(&out, nil)))
	ref := func(name string) dag.ObjectRef {
		return dag.ObjectRef{Kind: dag.KindIngress, Namespace: "default", Name: name}
	}
	st := func(name string, v dag.StatusValue) *dag.Status { return &dag.Status{Object: ref(name), Status: v} }
	l.Observe([]*dag.Status{st("a", dag.StatusValid), st("b", dag.StatusValid)})
	out.Reset()
	l.ObserveTouched([]*dag.Status{st("a", dag.StatusValid), st("b", dag.StatusInvalid), st("c", dag.StatusValid)},
		[]dag.ObjectRef{ref("b"), ref("c"), ref("gone")})
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(got) != 2 || !strings.Contains(got[0], "name=b") || !strings.Contains(got[1], "name=c") {
		t.Fatalf("want b's change and the new c, got %q", got)
	}
	out.Reset()
	l.ObserveTouched([]*dag.Status{st("a", dag.StatusValid), st("b", dag.StatusInvalid), st("c", dag.StatusValid)}, []dag.ObjectRef{ref("b")})
	if out.Len() != 0 {
		t.Fatalf("b did not change, yet logged %q", out.String())
	}
}
