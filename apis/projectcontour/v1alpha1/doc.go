// Package v1alpha1 holds the projectcontour.io/v1alpha1 kinds Portico reads:
// ExtensionService, a service that the proxy itself calls (an external authorization
// server), which HTTPProxies refer to. Type names, JSON field names and validation follow
// the schema Contour publishes for this group, so that manifests already written for it
// apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=projectcontour.io
package v1alpha1
