package dag

import (
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// RefOf returns the reference of the status of a routing object: an Ingress,
// IngressRoute, HTTPProxy, or a Gateway API object that Portico writes status for (not a
// ReferenceGrant); false for any other object.
func RefOf(obj runtime.Object) (ObjectRef, bool) {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return ObjectRef{Kind: KindIngress, Namespace: o.Namespace, Name: o.Name}, true
	case *ingressroutev1.IngressRoute:
		return ObjectRef{Kind: KindIngressRoute, Namespace: o.Namespace, Name: o.Name}, true
	case *contourv1.HTTPProxy:
		return ObjectRef{Kind: KindHTTPProxy, Namespace: o.Namespace, Name: o.Name}, true
	case *gatewayv1.GatewayClass:
		return ObjectRef{Kind: KindGatewayClass, Name: o.Name}, true
	case *gatewayv1.Gateway:
		return ObjectRef{Kind: KindGateway, Namespace: o.Namespace, Name: o.Name}, true
	case *gatewayv1.ListenerSet:
		return ObjectRef{Kind: KindListenerSet, Namespace: o.Namespace, Name: o.Name}, true
	case *gatewayv1.HTTPRoute:
		return ObjectRef{Kind: KindHTTPRoute, Namespace: o.Namespace, Name: o.Name}, true
	case *gatewayv1.GRPCRoute:
		return ObjectRef{Kind: KindGRPCRoute, Namespace: o.Namespace, Name: o.Name}, true
	case *gatewayv1.TLSRoute:
		return ObjectRef{Kind: KindTLSRoute, Namespace: o.Namespace, Name: o.Name}, true
	case *gatewayv1.BackendTLSPolicy:
		return ObjectRef{Kind: KindBackendTLSPolicy, Namespace: o.Namespace, Name: o.Name}, true
	}
	return ObjectRef{}, false
}
