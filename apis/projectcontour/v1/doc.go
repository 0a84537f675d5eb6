// Package v1 holds the projectcontour.io/v1 API: HTTPProxy (the realisation of seed 004's
// goals) and TLSCertificateDelegation. Type names, JSON field names and validation follow
// the schema Contour publishes for this group, so that HTTPProxies already in clusters
// and repositories apply unchanged. Portico's additions (seed 004's cookie and userAgent
// conditions and failurePolicy, an include's permitInsecure, a proxy's httpVersions) are
// optional fields that no existing manifest sets; their comments start with "Portico:".
//
// +kubebuilder:object:generate=true
// +groupName=projectcontour.io
package v1
