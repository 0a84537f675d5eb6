// Package v1beta1 holds the contour.heptio.com/v1beta1 API: IngressRoute (seeds 003 and
// 002) and TLSCertificateDelegation. The group and field names are those of the design
// documents, so that manifests written for them work unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=contour.heptio.com
package v1beta1
