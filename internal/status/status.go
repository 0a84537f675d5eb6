// Package status reports the outcome of a build to users: as `portico check` output, and
// as log lines when an object's status changes. (Writing status to the Kubernetes API
// lives beside it.)
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"text/tabwriter"

	"github.com/portico-dev/portico/internal/dag"
)

// Entry is one object's status in `portico check -o json`. Field names are part of the
// command-line contract.
type Entry struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Status      string `json:"status"`
	Description string `json:"description"`
	// Errors and Warnings are the problems one by one, for the kinds whose status lists
	// them (HTTPProxy): what its Valid condition's errors and warnings say.
	Errors   []Problem `json:"errors,omitempty"`
	Warnings []Problem `json:"warnings,omitempty"`
}

// Problem is one error or warning of an Entry.
type Problem struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// errorsOf are the errors an object's status lists: its problems, and for an orphaned
// HTTPProxy the fact that it is orphaned, as its Valid condition says.
func errorsOf(s *dag.Status) []dag.Problem {
	if s.Object.Kind == dag.KindHTTPProxy && s.Status == dag.StatusOrphaned && len(s.Errors) == 0 {
		return []dag.Problem{{Type: ReasonOrphaned, Reason: ReasonOrphaned, Message: s.Description}}
	}
	return s.Errors
}

func problems(ps []dag.Problem) []Problem {
	if len(ps) == 0 {
		return nil
	}
	out := make([]Problem, len(ps))
	for i, p := range ps {
		out[i] = Problem{Type: p.Type, Reason: p.Reason, Message: p.Message}
	}
	return out
}

// Entries converts build statuses to their reported form.
func Entries(statuses []*dag.Status) []Entry {
	out := make([]Entry, 0, len(statuses))
	for _, s := range statuses {
		out = append(out, Entry{
			Kind: s.Object.Kind, Namespace: s.Object.Namespace, Name: s.Object.Name,
			Status: string(s.Status), Description: s.Description,
			Errors: problems(errorsOf(s)), Warnings: problems(s.Warnings),
		})
	}
	return out
}

// WriteJSON writes the statuses as one JSON array.
func WriteJSON(w io.Writer, statuses []*dag.Status) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(Entries(statuses))
}

// WriteTable writes the statuses as an aligned table for people.
func WriteTable(w io.Writer, statuses []*dag.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tSTATUS\tDESCRIPTION")
	for _, e := range Entries(statuses) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Kind, e.Namespace, e.Name, e.Status, e.Description)
	}
	return tw.Flush()
}

// Failed reports whether any object is invalid, or orphaned unless allowOrphaned: what
// makes `portico check` exit 1. Blue-green setups keep their standby orphaned on purpose
// and pass allowOrphaned.
func Failed(statuses []*dag.Status, allowOrphaned bool) bool {
	for _, s := range statuses {
		if s.Status == dag.StatusInvalid || (s.Status == dag.StatusOrphaned && !allowOrphaned) {
			return true
		}
	}
	return false
}

// Logger logs each object's status when it changes, so that `portico run` users see at
// once why an edit did not take effect.
type Logger struct {
	logger *slog.Logger
	// last are the statuses of the previous call, ordered by object.
	last []*dag.Status
}

// NewLogger returns a Logger that has seen no status yet.
func NewLogger(l *slog.Logger) *Logger {
	return &Logger{logger: l}
}

// Observe logs the statuses that differ from the previous call. It walks both lists in
// object order, as Graph.Statuses comes, without a map: a rebuild at 10,000 objects
// should not cost a 10,000-entry map to find the one status that changed.
func (l *Logger) Observe(statuses []*dag.Status) {
	if !slices.IsSortedFunc(statuses, byObject) {
		statuses = slices.Clone(statuses)
		slices.SortStableFunc(statuses, byObject)
	}
	prev := l.last
	for _, s := range statuses {
		for len(prev) > 0 && dag.CompareObjectRefs(prev[0].Object, s.Object) < 0 {
			prev = prev[1:]
		}
		if len(prev) > 0 && prev[0].Object == s.Object && prev[0].Same(s) {
			continue
		}
		l.log(s)
	}
	l.last = statuses
}

// ObserveTouched is Observe for a build that says which objects it may have changed
// (dag.Incremental.Touched): only their statuses are compared.
func (l *Logger) ObserveTouched(statuses []*dag.Status, touched []dag.ObjectRef) {
	if !slices.IsSortedFunc(statuses, byObject) {
		l.Observe(statuses)
		return
	}
	for _, ref := range touched {
		before := dag.StatusesOf(l.last, ref)
		for _, s := range dag.StatusesOf(statuses, ref) {
			if !slices.ContainsFunc(before, s.Same) {
				l.log(s)
			}
		}
	}
	l.last = statuses
}

func (l *Logger) log(s *dag.Status) {
	level := slog.LevelInfo
	if s.Status == dag.StatusInvalid || s.Status == dag.StatusOrphaned {
		level = slog.LevelWarn
	}
	l.logger.Log(context.Background(), level, "status", "kind", s.Object.Kind, "namespace", s.Object.Namespace,
		"name", s.Object.Name, "status", string(s.Status), "description", s.Description)
}

func byObject(a, b *dag.Status) int { return dag.CompareObjectRefs(a.Object, b.Object) }
