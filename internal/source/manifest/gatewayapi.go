package manifest

// Gateway API (gateway.networking.k8s.io) objects: the v1 kinds Portico reads, the
// v1beta1 versions of GatewayClass, Gateway, HTTPRoute and ReferenceGrant converted to v1
// (their fields are v1's: the module defines them as the same types), and the defaults
// the API server applies from the CRDs' schemas.

import (
	"encoding/json"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gatewayv1alpha3 "sigs.k8s.io/gateway-api/apis/v1alpha3"
	gatewayv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

var (
	gvkGatewayClass     = gatewayv1.SchemeGroupVersion.WithKind("GatewayClass")
	gvkGateway          = gatewayv1.SchemeGroupVersion.WithKind("Gateway")
	gvkListenerSet      = gatewayv1.SchemeGroupVersion.WithKind("ListenerSet")
	gvkHTTPRoute        = gatewayv1.SchemeGroupVersion.WithKind("HTTPRoute")
	gvkGRPCRoute        = gatewayv1.SchemeGroupVersion.WithKind("GRPCRoute")
	gvkTLSRoute         = gatewayv1.SchemeGroupVersion.WithKind("TLSRoute")
	gvkReferenceGrant   = gatewayv1.SchemeGroupVersion.WithKind("ReferenceGrant")
	gvkBackendTLSPolicy = gatewayv1.SchemeGroupVersion.WithKind("BackendTLSPolicy")

	gvkGatewayClassV1beta1   = gatewayv1beta1.SchemeGroupVersion.WithKind("GatewayClass")
	gvkGatewayV1beta1        = gatewayv1beta1.SchemeGroupVersion.WithKind("Gateway")
	gvkHTTPRouteV1beta1      = gatewayv1beta1.SchemeGroupVersion.WithKind("HTTPRoute")
	gvkReferenceGrantV1beta1 = gatewayv1beta1.SchemeGroupVersion.WithKind("ReferenceGrant")
)

// gatewayNotYetRead are the route kinds of the API that Portico does not serve.
var gatewayNotYetRead = func() map[schema.GroupVersionKind]string {
	const advice = "Portico serves HTTPRoute, GRPCRoute and TLSRoute (TLS passthrough or termination to a TCP backend)"
	out := map[schema.GroupVersionKind]string{}
	for _, v := range []string{"v1", "v1alpha2"} {
		for _, k := range []string{"TCPRoute", "UDPRoute"} {
			out[schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: v, Kind: k}] = advice
		}
	}
	return out
}()

// addGatewayAPI registers the Gateway API types read (and those of the other versions,
// so that a kind Portico does not read is recognised as one of the API's).
func addGatewayAPI(s *runtime.Scheme) {
	for _, add := range []func(*runtime.Scheme) error{gatewayv1.Install, gatewayv1beta1.Install} {
		if err := add(s); err != nil {
			panic(err) // programming error, caught by any test
		}
	}
	s.AddTypeDefaultingFunc(&gatewayv1.GatewayClass{}, defaultGatewayAPI)
	s.AddTypeDefaultingFunc(&gatewayv1.Gateway{}, defaultGatewayAPI)
	s.AddTypeDefaultingFunc(&gatewayv1.ListenerSet{}, defaultGatewayAPI)
	s.AddTypeDefaultingFunc(&gatewayv1.HTTPRoute{}, defaultGatewayAPI)
	s.AddTypeDefaultingFunc(&gatewayv1.GRPCRoute{}, defaultGatewayAPI)
	s.AddTypeDefaultingFunc(&gatewayv1.TLSRoute{}, defaultGatewayAPI)
	s.AddTypeDefaultingFunc(&gatewayv1.ReferenceGrant{}, defaultGatewayAPI)
	s.AddTypeDefaultingFunc(&gatewayv1.BackendTLSPolicy{}, defaultGatewayAPI)
}

// gatewayAPIVersions are the other versions of the API's kinds, known so that a manifest
// of one is told which version Portico reads rather than that its kind does not exist.
func gatewayAPIVersions() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{gatewayv1.Install, gatewayv1beta1.Install, gatewayv1alpha2.Install, gatewayv1alpha3.Install} {
		if err := add(s); err != nil {
			panic(err) // programming error, caught by any test
		}
	}
	return s
}

// gatewayFromV1beta1 converts the v1beta1 kinds, whose fields are v1's, to v1; other
// objects are returned as they are.
func gatewayFromV1beta1(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *gatewayv1beta1.GatewayClass:
		return (*gatewayv1.GatewayClass)(o.DeepCopy())
	case *gatewayv1beta1.Gateway:
		return (*gatewayv1.Gateway)(o.DeepCopy())
	case *gatewayv1beta1.HTTPRoute:
		return (*gatewayv1.HTTPRoute)(o.DeepCopy())
	case *gatewayv1beta1.ReferenceGrant:
		return (*gatewayv1.ReferenceGrant)(o.DeepCopy())
	}
	return obj
}

// gatewayDefaults are the defaults of the Gateway API CRDs' schemas (the
// +kubebuilder:default markers of the module's types), by the Go type holding the field
// and the field's Go name, as the JSON the schema gives. A field is defaulted when it is
// absent (nil, or a zero string or number), and a defaulted value gets the defaults of
// its own fields, as the API server's structural defaulting does.
var gatewayDefaults = map[reflect.Type]map[string]string{
	reflect.TypeFor[gatewayv1.ParentReference]():           {"Group": `"gateway.networking.k8s.io"`, "Kind": `"Gateway"`},
	reflect.TypeFor[gatewayv1.ParentGatewayReference]():    {"Group": `"gateway.networking.k8s.io"`, "Kind": `"Gateway"`},
	reflect.TypeFor[gatewayv1.BackendObjectReference]():    {"Group": `""`, "Kind": `"Service"`},
	reflect.TypeFor[gatewayv1.SecretObjectReference]():     {"Group": `""`, "Kind": `"Secret"`},
	reflect.TypeFor[gatewayv1.BackendRef]():                {"Weight": `1`},
	reflect.TypeFor[gatewayv1.HTTPRouteSpec]():             {"Rules": `[{"matches":[{"path":{"type":"PathPrefix","value":"/"}}]}]`},
	reflect.TypeFor[gatewayv1.HTTPRouteRule]():             {"Matches": `[{"path":{"type":"PathPrefix","value":"/"}}]`},
	reflect.TypeFor[gatewayv1.HTTPRouteMatch]():            {"Path": `{"type":"PathPrefix","value":"/"}`},
	reflect.TypeFor[gatewayv1.HTTPPathMatch]():             {"Type": `"PathPrefix"`, "Value": `"/"`},
	reflect.TypeFor[gatewayv1.HTTPHeaderMatch]():           {"Type": `"Exact"`},
	reflect.TypeFor[gatewayv1.HTTPQueryParamMatch]():       {"Type": `"Exact"`},
	reflect.TypeFor[gatewayv1.HTTPRequestRedirectFilter](): {"StatusCode": `302`},
	reflect.TypeFor[gatewayv1.HTTPRouteRetry]():            {"Attempts": `1`},
	reflect.TypeFor[gatewayv1.HTTPCORSFilter]():            {"MaxAge": `5`},
	reflect.TypeFor[gatewayv1.GRPCMethodMatch]():           {"Type": `"Exact"`},
	reflect.TypeFor[gatewayv1.GRPCHeaderMatch]():           {"Type": `"Exact"`},
	reflect.TypeFor[gatewayv1.Listener]():                  {"AllowedRoutes": `{"namespaces":{"from":"Same"}}`},
	reflect.TypeFor[gatewayv1.ListenerEntry]():             {"AllowedRoutes": `{"namespaces":{"from":"Same"}}`},
	reflect.TypeFor[gatewayv1.AllowedRoutes]():             {"Namespaces": `{"from":"Same"}`},
	reflect.TypeFor[gatewayv1.RouteNamespaces]():           {"From": `"Same"`},
	reflect.TypeFor[gatewayv1.AllowedListeners]():          {"Namespaces": `{"from":"None"}`},
	reflect.TypeFor[gatewayv1.ListenerNamespaces]():        {"From": `"None"`},
	reflect.TypeFor[gatewayv1.RouteGroupKind]():            {"Group": `"gateway.networking.k8s.io"`},
	reflect.TypeFor[gatewayv1.GatewaySpecAddress]():        {"Type": `"IPAddress"`},
	reflect.TypeFor[gatewayv1.GatewayStatusAddress]():      {"Type": `"IPAddress"`},
	reflect.TypeFor[gatewayv1.ListenerTLSConfig]():         {"Mode": `"Terminate"`},
	reflect.TypeFor[gatewayv1.FrontendTLSValidation]():     {"Mode": `"AllowValidOnly"`},
	reflect.TypeFor[gatewayv1.SessionPersistence]():        {"Type": `"Cookie"`},
	reflect.TypeFor[gatewayv1.CookieConfig]():              {"LifetimeType": `"Session"`},
	reflect.TypeFor[gatewayv1.Fraction]():                  {"Denominator": `100`},
}

// defaultGatewayAPI applies gatewayDefaults to a Gateway API object's spec; its status
// is the controller's to write, never defaulted from a manifest.
func defaultGatewayAPI(obj any) {
	spec := reflect.ValueOf(obj).Elem().FieldByName("Spec")
	if !spec.IsValid() {
		return
	}
	applyDefaults(spec)
}

// applyDefaults walks v (addressable) and fills the absent fields that gatewayDefaults
// names, outermost first.
func applyDefaults(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			applyDefaults(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			applyDefaults(v.Index(i))
		}
	case reflect.Struct:
		for name, def := range gatewayDefaults[v.Type()] {
			f := v.FieldByName(name)
			if !f.IsValid() {
				panic(fmt.Sprintf("gatewayDefaults: %s has no field %s", v.Type(), name)) // caught by any test
			}
			if f.IsZero() {
				setJSON(f, def)
			}
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				applyDefaults(v.Field(i))
			}
		}
	}
}

// setJSON sets f to the value def holds.
func setJSON(f reflect.Value, def string) {
	p := reflect.New(f.Type())
	if err := json.Unmarshal([]byte(def), p.Interface()); err != nil {
		panic(fmt.Sprintf("gatewayDefaults: %s: %v", def, err)) // caught by any test
	}
	f.Set(p.Elem())
}

// DefaultGatewayAPI applies the Gateway API CRDs' defaults to what ptr points to (a
// spec, a status, or a part of one: a ParentReference, say) as the API server would when
// it is written, so that a status about to be written compares equal to its stored copy.
func DefaultGatewayAPI(ptr any) { applyDefaults(reflect.ValueOf(ptr)) }
