package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of IngressRoute and TLSCertificateDelegation.
const GroupName = "contour.heptio.com"

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// AddToScheme registers this package's types with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&IngressRoute{}, &IngressRouteList{},
		&TLSCertificateDelegation{}, &TLSCertificateDelegationList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// DecodeErrorAnnotation marks an IngressRoute that a client read from the API server but
// could not decode (only a route's free-form "service" field can cause that); its value
// says why. Such an object has no spec, and is reported invalid with that reason.
const DecodeErrorAnnotation = "portico.dev/decode-error"
