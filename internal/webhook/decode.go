package webhook

import (
	"encoding/json"
	"errors"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
	"github.com/portico-dev/portico/internal/contourclient"
)

// kinds are the kinds the webhook validates, by the group, version and kind of the
// request (the webhook's rules name these versions; with matchPolicy Equivalent the
// API server converts other versions of the same resource to them). Each decoder reads
// an object as the controller's source does, so that a validation sees what a build
// would see. A new kind is one entry here and one case in dag.ValidateObject (or, for
// Gateway API kinds, in gatewayapi.ObjectFindings).
func kinds() map[schema.GroupVersionKind]decodeFunc {
	irDecoder := ingressRouteDecoder()
	return map[schema.GroupVersionKind]decodeFunc{
		networkingv1.SchemeGroupVersion.WithKind("Ingress"): decodeInto[networkingv1.Ingress],
		ingressroutev1.SchemeGroupVersion.WithKind("IngressRoute"): func(raw []byte) (runtime.Object, error) {
			// An IngressRoute whose free-form "service" field does not decode comes back
			// marked, as the informers see it, and fails validation with that reason.
			gvk := ingressroutev1.SchemeGroupVersion.WithKind("IngressRoute")
			obj, _, err := irDecoder.Decode(raw, &gvk, &ingressroutev1.IngressRoute{})
			return obj, err
		},
		contourv1.SchemeGroupVersion.WithKind("HTTPProxy"):              decodeInto[contourv1.HTTPProxy],
		contourv1alpha1.SchemeGroupVersion.WithKind("ExtensionService"): decodeInto[contourv1alpha1.ExtensionService],

		// Gateway API kinds, in v1 only: the webhook's rules name v1 with matchPolicy
		// Equivalent, so the API server sends writes made through the other versions the
		// CRDs serve (v1beta1, v1alpha2, v1alpha3) converted to v1. ReferenceGrants have
		// no status of Portico's, hence nothing to warn about: not asked for.
		gatewayv1.SchemeGroupVersion.WithKind("GatewayClass"):     decodeInto[gatewayv1.GatewayClass],
		gatewayv1.SchemeGroupVersion.WithKind("Gateway"):          decodeInto[gatewayv1.Gateway],
		gatewayv1.SchemeGroupVersion.WithKind("ListenerSet"):      decodeInto[gatewayv1.ListenerSet],
		gatewayv1.SchemeGroupVersion.WithKind("HTTPRoute"):        decodeInto[gatewayv1.HTTPRoute],
		gatewayv1.SchemeGroupVersion.WithKind("GRPCRoute"):        decodeInto[gatewayv1.GRPCRoute],
		gatewayv1.SchemeGroupVersion.WithKind("TLSRoute"):         decodeInto[gatewayv1.TLSRoute],
		gatewayv1.SchemeGroupVersion.WithKind("BackendTLSPolicy"): decodeInto[gatewayv1.BackendTLSPolicy],
	}
}

// decodeInto decodes JSON into a new T, as client-go does for built-in kinds.
func decodeInto[T any, PT interface {
	*T
	runtime.Object
}](raw []byte) (runtime.Object, error) {
	if len(raw) == 0 {
		return nil, errors.New("the request has no object")
	}
	obj := PT(new(T))
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// ingressRouteDecoder is the decoder the controller's IngressRoute client reads with.
func ingressRouteDecoder() runtime.Decoder {
	ns := contourclient.RESTConfig(&rest.Config{}).NegotiatedSerializer
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		panic("contourclient: no JSON serializer") // static configuration
	}
	return ns.DecoderToVersion(info.Serializer, ingressroutev1.SchemeGroupVersion)
}
