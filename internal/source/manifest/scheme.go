package manifest

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
)

// Group/version/kinds of everything Portico keeps from manifests, after
// conversion. Objects returned by Decode and LoadDir carry one of these.
var (
	gvkIngress       = networkingv1.SchemeGroupVersion.WithKind("Ingress")
	gvkIngressClass  = networkingv1.SchemeGroupVersion.WithKind("IngressClass")
	gvkService       = corev1.SchemeGroupVersion.WithKind("Service")
	gvkEndpoints     = corev1.SchemeGroupVersion.WithKind("Endpoints")
	gvkSecret        = corev1.SchemeGroupVersion.WithKind("Secret")
	gvkNamespace     = corev1.SchemeGroupVersion.WithKind("Namespace")
	gvkEndpointSlice = discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")

	gvkIngressRoute             = contourv1beta1.SchemeGroupVersion.WithKind("IngressRoute")
	gvkTLSCertificateDelegation = contourv1beta1.SchemeGroupVersion.WithKind("TLSCertificateDelegation")

	gvkHTTPProxy                       = contourv1.SchemeGroupVersion.WithKind("HTTPProxy")
	gvkProjectTLSCertificateDelegation = contourv1.SchemeGroupVersion.WithKind("TLSCertificateDelegation")
	gvkExtensionService                = contourv1alpha1.SchemeGroupVersion.WithKind("ExtensionService")

	gvkIngressNetV1beta1      = networkingv1beta1.SchemeGroupVersion.WithKind("Ingress")
	gvkIngressClassNetV1beta1 = networkingv1beta1.SchemeGroupVersion.WithKind("IngressClass")
	gvkIngressExtV1beta1      = extensionsv1beta1.SchemeGroupVersion.WithKind("Ingress")
)

// kindInfo says how a kept group/version/kind is handled.
type kindInfo struct {
	// target is the GVK the object is returned as (after conversion).
	target schema.GroupVersionKind
	// namespaced is false for cluster-scoped kinds.
	namespaced bool
}

// keptKinds are the GVKs read from manifests. Anything else is skipped.
var keptKinds = map[schema.GroupVersionKind]kindInfo{
	gvkIngress:                {gvkIngress, true},
	gvkIngressNetV1beta1:      {gvkIngress, true},
	gvkIngressExtV1beta1:      {gvkIngress, true},
	gvkIngressClass:           {gvkIngressClass, false},
	gvkIngressClassNetV1beta1: {gvkIngressClass, false},
	gvkService:                {gvkService, true},
	gvkEndpoints:              {gvkEndpoints, true},
	gvkSecret:                 {gvkSecret, true},
	gvkNamespace:              {gvkNamespace, false}, // labels that Gateway listeners select route namespaces by
	gvkEndpointSlice:          {gvkEndpointSlice, true},

	gvkIngressRoute:             {gvkIngressRoute, true},
	gvkTLSCertificateDelegation: {gvkTLSCertificateDelegation, true},

	gvkHTTPProxy:                       {gvkHTTPProxy, true},
	gvkProjectTLSCertificateDelegation: {gvkProjectTLSCertificateDelegation, true},
	gvkExtensionService:                {gvkExtensionService, true},

	gvkGatewayClass:     {gvkGatewayClass, false},
	gvkGateway:          {gvkGateway, true},
	gvkListenerSet:      {gvkListenerSet, true},
	gvkHTTPRoute:        {gvkHTTPRoute, true},
	gvkGRPCRoute:        {gvkGRPCRoute, true},
	gvkTLSRoute:         {gvkTLSRoute, true},
	gvkReferenceGrant:   {gvkReferenceGrant, true},
	gvkBackendTLSPolicy: {gvkBackendTLSPolicy, true},

	gvkGatewayClassV1beta1:   {gvkGatewayClass, false},
	gvkGatewayV1beta1:        {gvkGateway, true},
	gvkHTTPRouteV1beta1:      {gvkHTTPRoute, true},
	gvkReferenceGrantV1beta1: {gvkReferenceGrant, true},
}

var (
	schemeOnce     sync.Once
	theScheme      *runtime.Scheme
	theDeserialize runtime.Decoder
)

func initScheme() {
	s := runtime.NewScheme()
	add := func(gv schema.GroupVersion, objs ...runtime.Object) {
		s.AddKnownTypes(gv, objs...)
		metav1.AddToGroupVersion(s, gv)
	}
	add(corev1.SchemeGroupVersion,
		&corev1.Service{}, &corev1.ServiceList{},
		&corev1.Endpoints{}, &corev1.EndpointsList{},
		&corev1.Secret{}, &corev1.SecretList{},
		&corev1.Namespace{}, &corev1.NamespaceList{},
	)
	add(discoveryv1.SchemeGroupVersion,
		&discoveryv1.EndpointSlice{}, &discoveryv1.EndpointSliceList{},
	)
	add(networkingv1.SchemeGroupVersion,
		&networkingv1.Ingress{}, &networkingv1.IngressList{},
		&networkingv1.IngressClass{}, &networkingv1.IngressClassList{},
	)
	add(networkingv1beta1.SchemeGroupVersion,
		&networkingv1beta1.Ingress{}, &networkingv1beta1.IngressList{},
		&networkingv1beta1.IngressClass{}, &networkingv1beta1.IngressClassList{},
	)
	add(extensionsv1beta1.SchemeGroupVersion,
		&extensionsv1beta1.Ingress{}, &extensionsv1beta1.IngressList{},
	)
	for _, add := range []func(*runtime.Scheme) error{contourv1beta1.AddToScheme, contourv1.AddToScheme, contourv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // programming error, caught by any test
		}
	}

	addGatewayAPI(s)

	mustConv := func(a, b any, fn conversion.ConversionFunc) {
		if err := s.AddConversionFunc(a, b, fn); err != nil {
			panic(err) // programming error, caught by any test
		}
	}
	mustConv((*networkingv1beta1.Ingress)(nil), (*networkingv1.Ingress)(nil), func(a, b any, _ conversion.Scope) error {
		*b.(*networkingv1.Ingress) = *ingressFromNetworkingV1beta1(a.(*networkingv1beta1.Ingress))
		return nil
	})
	mustConv((*extensionsv1beta1.Ingress)(nil), (*networkingv1.Ingress)(nil), func(a, b any, _ conversion.Scope) error {
		out, err := ingressFromExtensionsV1beta1(a.(*extensionsv1beta1.Ingress))
		if err != nil {
			return err
		}
		*b.(*networkingv1.Ingress) = *out
		return nil
	})
	mustConv((*networkingv1beta1.IngressClass)(nil), (*networkingv1.IngressClass)(nil), func(a, b any, _ conversion.Scope) error {
		*b.(*networkingv1.IngressClass) = *ingressClassFromNetworkingV1beta1(a.(*networkingv1beta1.IngressClass))
		return nil
	})

	s.AddTypeDefaultingFunc(&networkingv1.Ingress{}, func(o any) { defaultIngress(o.(*networkingv1.Ingress)) })
	s.AddTypeDefaultingFunc(&networkingv1.IngressClass{}, func(o any) { defaultIngressClass(o.(*networkingv1.IngressClass)) })
	s.AddTypeDefaultingFunc(&corev1.Service{}, func(o any) { defaultService(o.(*corev1.Service)) })
	s.AddTypeDefaultingFunc(&corev1.Endpoints{}, func(o any) { defaultEndpoints(o.(*corev1.Endpoints)) })
	s.AddTypeDefaultingFunc(&corev1.Secret{}, func(o any) { defaultSecret(o.(*corev1.Secret)) })
	s.AddTypeDefaultingFunc(&discoveryv1.EndpointSlice{}, func(o any) { defaultEndpointSlice(o.(*discoveryv1.EndpointSlice)) })

	theScheme = s
	theDeserialize = serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}

// Scheme returns the runtime.Scheme of every kind Portico reads from
// manifests: the kept kinds in every version accepted (including the
// deprecated Ingress versions and Gateway API v1beta1), with conversion functions from the old
// versions to networking.k8s.io/v1 and defaulting functions applying the
// API server defaults Portico relies on (see Default).
//
// The scheme is shared; callers must not modify it.
func Scheme() *runtime.Scheme {
	schemeOnce.Do(initScheme)
	return theScheme
}

func deserializer() runtime.Decoder {
	schemeOnce.Do(initScheme)
	return theDeserialize
}
