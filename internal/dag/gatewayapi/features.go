package gatewayapi

import gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

// SupportedFeatures are the conformance suite's names of the features Portico
// implements, in the order GatewayClass status lists them (alphabetical, as the API
// asks). This list is the one place they are named: a feature is added here when its
// graph rules and its data-plane behaviour both exist.
var SupportedFeatures = []gatewayv1.FeatureName{
	"BackendTLSPolicy",
	"BackendTLSPolicySANValidation",
	"GRPCRoute",
	"GRPCRouteNamedRouteRule",
	"GRPCRouteRequestHeaderModifier",
	"Gateway",
	"GatewayAddressEmpty",
	"GatewayFrontendClientCertificateValidation",
	"GatewayFrontendClientCertificateValidationInsecureFallback",
	"GatewayHTTPListenerIsolation",
	"GatewayHTTPSListenerDetectMisdirectedRequests",
	"GatewayPort8080",
	"GatewayRouteHostnameIntersectionPrecedence",
	"HTTPRoute",
	"HTTPRoute303RedirectStatusCode",
	"HTTPRoute307RedirectStatusCode",
	"HTTPRoute308RedirectStatusCode",
	"HTTPRouteBackendProtocolH2C",
	"HTTPRouteBackendProtocolWebSocket",
	"HTTPRouteBackendRequestHeaderModification",
	"HTTPRouteBackendTimeout",
	"HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching",
	"HTTPRouteNamedRouteRule",
	"HTTPRouteParentRefPort",
	"HTTPRoutePathRedirect",
	"HTTPRoutePathRewrite",
	"HTTPRoutePortRedirect",
	"HTTPRouteQueryParamMatching",
	"HTTPRouteRequestMirror",
	"HTTPRouteRequestMultipleMirrors",
	"HTTPRouteRequestPercentageMirror",
	"HTTPRouteRequestTimeout",
	"HTTPRouteResponseHeaderModification",
	"HTTPRouteRetryCodes",
	"HTTPRouteRetryConnectionError",
	"HTTPRouteSchemeRedirect",
	"ListenerSet",
	"ReferenceGrant",
	"TLSRoute",
	"TLSRouteModeMixed",
	"TLSRouteModeTerminate",
}

func supportedFeatures() []gatewayv1.SupportedFeature {
	out := make([]gatewayv1.SupportedFeature, len(SupportedFeatures))
	for i, f := range SupportedFeatures {
		out[i] = gatewayv1.SupportedFeature{Name: f}
	}
	return out
}
