package gatewayapi

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/dag"
)

// condError is a problem found while processing an object, carrying the condition it
// sets (Type False, or True for Conflicted) with its Reason: validators return them and
// the status code turns them into conditions and check's problems.
type condError struct {
	Type    string
	Reason  string
	Message string
}

func (e *condError) Error() string { return e.Message }

func newError(typ, reason, format string, args ...any) *condError {
	return &condError{Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// condition is a condition without timestamps: the status writer sets
// ObservedGeneration and LastTransitionTime.
func condition(typ string, status bool, reason, message string) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: message}
}

// problem is e as check's problems carry it, its message prefixed by where.
func (e *condError) problem(where string) dag.Problem {
	return dag.Problem{Type: e.Type, Reason: e.Reason, Message: where + e.Message}
}

// summary is a dag.Status for one Gateway API object: what `portico check` prints.
// errs make it invalid; notes are remarks on an object that is served anyway.
func summary(ref dag.ObjectRef, errs, notes []dag.Problem, ok string) dag.Status {
	st := dag.Status{Object: ref, Status: dag.StatusValid, Description: ok, Errors: errs, Warnings: notes}
	messages := func(ps []dag.Problem) []string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = p.Message
		}
		return out
	}
	switch {
	case len(errs) > 0:
		st.Status = dag.StatusInvalid
		st.Description = strings.Join(append(messages(errs), messages(notes)...), "; ")
	case len(notes) > 0:
		st.Noted = true
		st.Description = ok + "; " + strings.Join(messages(notes), "; ")
	}
	return st
}
