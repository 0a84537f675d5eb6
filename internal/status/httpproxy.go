package status

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
)

// The Valid condition of an HTTPProxy, as HTTPProxy users (and their tooling) read it:
// True when the object is served; False with the errors otherwise.
const (
	ConditionValid       = "Valid"
	ReasonErrorPresent   = "ErrorPresent"
	ReasonOrphaned       = "Orphaned"
	ReasonWarningPresent = "WarningPresent"
)

// HTTPProxyStatus is the status an HTTPProxy with build status st should have. prev is
// the status it has now: the condition's lastTransitionTime moves only when the
// condition's truth does, as Kubernetes API conventions ask.
func HTTPProxyStatus(st dag.Status, generation int64, prev contourv1.HTTPProxyStatus, now time.Time) contourv1.HTTPProxyStatus {
	out := contourv1.HTTPProxyStatus{
		CurrentStatus: string(st.Status),
		Description:   st.Description,
		LoadBalancer:  prev.LoadBalancer,
	}
	c := contourv1.DetailedCondition{Condition: metav1.Condition{
		Type:               ConditionValid,
		ObservedGeneration: generation,
		Message:            st.Description,
	}}
	switch st.Status {
	case dag.StatusValid:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonValid
		if len(st.Warnings) > 0 {
			c.Reason = ReasonWarningPresent
		}
	case dag.StatusOrphaned:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonOrphaned
		c.Errors = []contourv1.SubCondition{{Type: ReasonOrphaned, Reason: ReasonOrphaned, Message: st.Description}}
	default:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonErrorPresent
	}
	for _, p := range st.Errors {
		c.Errors = append(c.Errors, contourv1.SubCondition{Type: p.Type, Reason: p.Reason, Message: p.Message})
	}
	for _, p := range st.Warnings {
		c.Warnings = append(c.Warnings, contourv1.SubCondition{Type: p.Type, Reason: p.Reason, Message: p.Message})
	}
	c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
	if old := validCondition(prev); old != nil && old.Status == c.Status {
		c.LastTransitionTime = old.LastTransitionTime
	}
	out.Conditions = []contourv1.DetailedCondition{c}
	return out
}

func validCondition(s contourv1.HTTPProxyStatus) *contourv1.DetailedCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == ConditionValid {
			return &s.Conditions[i]
		}
	}
	return nil
}

// sameHTTPProxyStatus reports whether two statuses say the same thing: what a writer
// compares before writing again (transition times aside).
func sameHTTPProxyStatus(a, b contourv1.HTTPProxyStatus) bool {
	if a.CurrentStatus != b.CurrentStatus || a.Description != b.Description || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		x, y := a.Conditions[i], b.Conditions[i]
		if x.Type != y.Type || x.Status != y.Status || x.Reason != y.Reason || x.Message != y.Message ||
			x.ObservedGeneration != y.ObservedGeneration || !slices.Equal(x.Errors, y.Errors) || !slices.Equal(x.Warnings, y.Warnings) {
			return false
		}
	}
	return true
}
