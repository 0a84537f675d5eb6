package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DetailedCondition is a status condition with the errors and warnings behind it, so
// that one condition ("Valid") can say everything that is wrong with an object.
type DetailedCondition struct {
	metav1.Condition `json:",inline"`
	// Errors are why the condition is what it is; empty when there are none.
	// +optional
	Errors []SubCondition `json:"errors,omitempty"`
	// Warnings are problems that do not change the condition.
	// +optional
	Warnings []SubCondition `json:"warnings,omitempty"`
}

// SubCondition is one error or warning of a DetailedCondition.
type SubCondition struct {
	// Type is CamelCase, optionally prefixed with a domain ("example.com/NoSecret"),
	// and names the problem: its status is True while the problem is there.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`
	Type string `json:"type"`
	// Status is True, False or Unknown. The schema requires it: writers set True.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status metav1.ConditionStatus `json:"status"`
	// Reason is a CamelCase identifier of the cause, for programs.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
	Reason string `json:"reason"`
	// Message says what is wrong and what to do, for people; it may be empty.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message"`
}
