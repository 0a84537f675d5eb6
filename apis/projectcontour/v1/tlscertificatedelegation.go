package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TLSCertificateDelegation lets HTTPProxies in other namespaces use Secrets of its
// namespace (certificates, CA bundles), by "namespace/name". It is the
// contour.heptio.com/v1beta1 kind of the same name, moved to this group.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,path=tlscertificatedelegations,singular=tlscertificatedelegation,shortName=tlscerts
type TLSCertificateDelegation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TLSCertificateDelegationSpec `json:"spec"`
	// Status is for controllers that report on delegations; Portico writes none.
	// +optional
	Status TLSCertificateDelegationStatus `json:"status,omitempty"`
}

// TLSCertificateDelegationList is a list of TLSCertificateDelegations.
//
// +kubebuilder:object:root=true
type TLSCertificateDelegationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TLSCertificateDelegation `json:"items"`
}

// TLSCertificateDelegationSpec lists the Secrets delegated.
type TLSCertificateDelegationSpec struct {
	Delegations []CertificateDelegation `json:"delegations"`
}

// CertificateDelegation allows the namespaces in TargetNamespaces to use SecretName.
type CertificateDelegation struct {
	// SecretName is a Secret in this object's namespace.
	SecretName string `json:"secretName"`
	// TargetNamespaces may use it; "*" means every namespace, none means no one.
	TargetNamespaces []string `json:"targetNamespaces"`
}

// TLSCertificateDelegationStatus holds conditions about the delegation.
type TLSCertificateDelegationStatus struct {
	// Conditions, keyed by type, as for HTTPProxies.
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	Conditions []DetailedCondition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}
