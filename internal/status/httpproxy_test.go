package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
)

// An HTTPProxy's status carries currentStatus, description and a Valid condition with
// the problems as errors and warnings sub-conditions, as HTTPProxy users read them.
func TestHTTPProxyStatusConditions(t *testing.T) {
	now := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	ref := dag.ObjectRef{Kind: dag.KindHTTPProxy, Namespace: "team", Name: "api"}
	warn := dag.Problem{Type: "NotImplemented", Reason: "NotImplemented", Message: "spec.virtualhost.corsPolicy is ignored"}
	bad := dag.Problem{Type: "RouteError", Reason: "InvalidCondition", Message: `spec.routes[0].conditions[0].prefix "x" must start with "/"`}
	cases := []struct {
		name string
		st   *dag.Status
		want contourv1.DetailedCondition
	}{
		{"valid", &dag.Status{Object: ref, Status: dag.StatusValid, Description: "valid HTTPProxy"},
			contourv1.DetailedCondition{Condition: metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "valid HTTPProxy", ObservedGeneration: 3}}},
		{"valid with warnings", &dag.Status{Object: ref, Status: dag.StatusValid, Description: "valid HTTPProxy; " + warn.Message, Warnings: []dag.Problem{warn}},
			contourv1.DetailedCondition{Condition: metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "WarningPresent", Message: "valid HTTPProxy; " + warn.Message, ObservedGeneration: 3},
				Warnings: []contourv1.SubCondition{{Type: warn.Type, Status: metav1.ConditionTrue, Reason: warn.Reason, Message: warn.Message}}}},
		{"invalid", &dag.Status{Object: ref, Status: dag.StatusInvalid, Description: "not served: " + bad.Message, Errors: []dag.Problem{bad}},
			contourv1.DetailedCondition{Condition: metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: "ErrorPresent", Message: "not served: " + bad.Message, ObservedGeneration: 3},
				Errors: []contourv1.SubCondition{{Type: bad.Type, Status: metav1.ConditionTrue, Reason: bad.Reason, Message: bad.Message}}}},
		{"orphaned", &dag.Status{Object: ref, Status: dag.StatusOrphaned, Description: "not included"},
			contourv1.DetailedCondition{Condition: metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: "Orphaned", Message: "not included", ObservedGeneration: 3},
				Errors: []contourv1.SubCondition{{Type: "Orphaned", Status: metav1.ConditionTrue, Reason: "Orphaned", Message: "not included"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := HTTPProxyStatus(tc.st, 3, contourv1.HTTPProxyStatus{}, now)
			if got.CurrentStatus != string(tc.st.Status) || got.Description != tc.st.Description {
				t.Errorf("currentStatus/description = %q/%q", got.CurrentStatus, got.Description)
			}
			tc.want.LastTransitionTime = metav1.NewTime(now)
			if diff := cmp.Diff([]contourv1.DetailedCondition{tc.want}, got.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// The transition time moves only when the condition's truth does, and a status that says
// the same thing is not written again.
func TestHTTPProxyStatusTransitionTime(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	ref := dag.ObjectRef{Kind: dag.KindHTTPProxy, Namespace: "team", Name: "api"}
	first := HTTPProxyStatus(&dag.Status{Object: ref, Status: dag.StatusValid, Description: "valid HTTPProxy"}, 1, contourv1.HTTPProxyStatus{}, t0)
	again := HTTPProxyStatus(&dag.Status{Object: ref, Status: dag.StatusValid, Description: "valid HTTPProxy"}, 1, first, t0.Add(time.Hour))
	if !again.Conditions[0].LastTransitionTime.Equal(&first.Conditions[0].LastTransitionTime) {
		t.Errorf("transition time moved without a transition: %v -> %v", first.Conditions[0].LastTransitionTime, again.Conditions[0].LastTransitionTime)
	}
	if !sameHTTPProxyStatus(first, again) {
		t.Error("the same status compares different: it would be written on every rebuild")
	}
	broken := HTTPProxyStatus(&dag.Status{Object: ref, Status: dag.StatusInvalid, Description: "not served: x"}, 2, again, t0.Add(2*time.Hour))
	if got := broken.Conditions[0].LastTransitionTime.Time; !got.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("transition time = %v, want the time of the change", got)
	}
	if sameHTTPProxyStatus(again, broken) {
		t.Error("a changed status compares the same")
	}
}
