package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of HTTPProxy and TLSCertificateDelegation.
const GroupName = "projectcontour.io"

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

// AddToScheme registers this package's types with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&HTTPProxy{}, &HTTPProxyList{},
		&TLSCertificateDelegation{}, &TLSCertificateDelegationList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// DecodeErrorAnnotation marks an HTTPProxy that a client read from the API server but
// could not decode into these types; its value says why. The API server can hold such
// an object: the schema lets through values a Go field cannot take (a negative entry of
// retriableStatusCodes, say), and a cluster may run another version of the CRD. Such an
// object has its metadata and status but no spec, and is reported invalid with that
// reason. The value is the same as for IngressRoutes.
const DecodeErrorAnnotation = "portico.dev/decode-error"
