// Package status reports the outcome of a build to users: as `portico check` output, and
// as log lines when an object's status changes. (Writing status to the Kubernetes API
// lives beside it.)
package status

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
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
	// Conditions and Listeners are a Gateway API object's: the conditions its status
	// subresource carries (its own, its listeners', or those about each parent), and its
	// listeners with their attached routes.
	Conditions []Condition `json:"conditions,omitempty"`
	Listeners  []Listener  `json:"listeners,omitempty"`
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
		conds, listeners := gatewayAPIDetails(s)
		out = append(out, Entry{
			Kind: s.Object.Kind, Namespace: s.Object.Namespace, Name: s.Object.Name,
			Status: string(s.Status), Description: s.Description,
			Errors: problems(errorsOf(s)), Warnings: problems(s.Warnings),
			Conditions: conds, Listeners: listeners,
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

// WriteTable writes the statuses as an aligned table for people, followed by the
// conditions of the Gateway API objects.
func WriteTable(w io.Writer, statuses []*dag.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tSTATUS\tDESCRIPTION")
	entries := Entries(statuses)
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Kind, e.Namespace, e.Name, e.Status, e.Description)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeGatewayAPIDetails(w, entries)
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

func byObject(a, b *dag.Status) int { return dag.CompareObjectRefs(a.Object, b.Object) }

// Handler serves the statuses of the latest build as `portico check -o json` prints
// them: the admin endpoint's GET /statuses. `?status=invalid,orphaned` keeps the objects
// of those statuses. latest returns false until a first build: then it answers 503.
func Handler(latest func() ([]*dag.Status, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		keep, err := statusFilter(r.URL.Query().Get("status"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		statuses, ok := latest()
		if !ok {
			http.Error(w, "no configuration has been built yet", http.StatusServiceUnavailable)
			return
		}
		if keep != nil {
			statuses = slices.DeleteFunc(slices.Clone(statuses), func(s *dag.Status) bool { return !keep[s.Status] })
		}
		w.Header().Set("Content-Type", "application/json")
		_ = WriteJSON(w, statuses) // a failed write means the client left
	})
}

// statusFilter parses a comma-separated list of status values; nil keeps every status.
func statusFilter(list string) (map[dag.StatusValue]bool, error) {
	if list == "" {
		return nil, nil
	}
	keep := map[dag.StatusValue]bool{}
	for _, v := range strings.Split(list, ",") {
		switch sv := dag.StatusValue(strings.TrimSpace(v)); sv {
		case dag.StatusValid, dag.StatusInvalid, dag.StatusOrphaned, dag.StatusIgnored:
			keep[sv] = true
		default:
			return nil, fmt.Errorf("status %q: use valid, invalid, orphaned or ignored (several separated by commas)", v)
		}
	}
	return keep, nil
}
