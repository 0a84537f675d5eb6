package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previousroutesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/internal_redirect/previous_routes/v3"
	safecrossschemev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/internal_redirect/safe_cross_scheme/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// internalRedirectPolicy has the data plane follow a route's upstream redirects:
// SafeOnly is a cross-scheme redirect with Envoy's safe_cross_scheme predicate, and a
// repeated route is refused by its previous_routes predicate.
func internalRedirectPolicy(ir *dag.InternalRedirect) *routev3.InternalRedirectPolicy {
	if ir == nil {
		return nil
	}
	codes := make([]uint32, len(ir.Codes))
	copy(codes, ir.Codes)
	p := &routev3.InternalRedirectPolicy{
		MaxInternalRedirects:     wrapperspb.UInt32(ir.MaxRedirects),
		RedirectResponseCodes:    codes,
		AllowCrossSchemeRedirect: ir.CrossScheme != "Never",
	}
	if ir.CrossScheme == "SafeOnly" {
		p.Predicates = append(p.Predicates, &corev3.TypedExtensionConfig{
			Name: "envoy.internal_redirect_predicates.safe_cross_scheme", TypedConfig: mustAny(&safecrossschemev3.SafeCrossSchemeConfig{})})
	}
	if ir.DenyRepeatedRoute {
		p.Predicates = append(p.Predicates, &corev3.TypedExtensionConfig{
			Name: "envoy.internal_redirect_predicates.previous_routes", TypedConfig: mustAny(&previousroutesv3.PreviousRoutesConfig{})})
	}
	return p
}
