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

// summary is a dag.Status for one Gateway API object: what `portico check` prints.
// errs make it invalid; notes are remarks on an object that is served anyway.
func summary(ref dag.ObjectRef, errs, notes []string, ok string) dag.Status {
	st := dag.Status{Object: ref, Status: dag.StatusValid, Description: ok}
	for _, e := range errs {
		st.Errors = append(st.Errors, dag.Problem{Type: "Error", Reason: "Invalid", Message: e})
	}
	for _, n := range notes {
		st.Warnings = append(st.Warnings, dag.Problem{Type: "Warning", Reason: "NotServed", Message: n})
	}
	switch {
	case len(errs) > 0:
		st.Status = dag.StatusInvalid
		st.Description = strings.Join(append(append([]string{}, errs...), notes...), "; ")
	case len(notes) > 0:
		st.Noted = true
		st.Description = ok + "; " + strings.Join(notes, "; ")
	}
	return st
}
