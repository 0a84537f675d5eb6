package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// TLSCertificateDelegation lets IngressRoutes in other namespaces use Secrets of its
// namespace as their certificate, by "namespace/name".
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=tlscertificatedelegations,singular=tlscertificatedelegation,shortName=tlscerts
type TLSCertificateDelegation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TLSCertificateDelegationSpec `json:"spec"`
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
	// TargetNamespaces may use it; "*" means every namespace.
	TargetNamespaces []string `json:"targetNamespaces"`
}
