package router

import (
	"errors"
	"fmt"
	"net/http"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previousroutesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/internal_redirect/previous_routes/v3"
	safecrossschemev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/internal_redirect/safe_cross_scheme/v3"
)

// internalRedirectSpec is a route's internal_redirect_policy: the proxy follows
// the upstream's redirects itself, and the client gets the answer of their target.
type internalRedirectSpec struct {
	Max   int   // max_internal_redirects (default 1)
	Codes []int // redirect_response_codes (default 302)
	Cross bool  // allow_cross_scheme_redirect
	// safeCrossScheme (predicate safe_cross_scheme): a redirect from HTTP to HTTPS is
	// not followed; previousRoutes (previous_routes): nor one to a route the request
	// has already been through.
	SafeCrossScheme, PreviousRoutes bool
}

func convertInternalRedirect(p *routev3.InternalRedirectPolicy) (*internalRedirectSpec, error) {
	if p == nil {
		return nil, nil
	}
	spec := &internalRedirectSpec{Max: 1, Codes: []int{http.StatusFound}, Cross: p.GetAllowCrossSchemeRedirect()}
	if m := p.GetMaxInternalRedirects(); m != nil {
		spec.Max = int(m.GetValue())
	}
	if len(p.GetRedirectResponseCodes()) > 0 {
		spec.Codes = spec.Codes[:0]
		for _, c := range p.GetRedirectResponseCodes() {
			switch c {
			case 301, 302, 303, 307, 308:
				spec.Codes = append(spec.Codes, int(c))
			default:
				return nil, fmt.Errorf("redirect_response_codes: %d is not a redirect Envoy follows (301, 302, 303, 307, 308)", c)
			}
		}
	}
	for _, pr := range p.GetPredicates() {
		tc := pr.GetTypedConfig()
		switch {
		case tc.MessageIs(&safecrossschemev3.SafeCrossSchemeConfig{}):
			spec.SafeCrossScheme = true
		case tc.MessageIs(&previousroutesv3.PreviousRoutesConfig{}):
			spec.PreviousRoutes = true
		default:
			return nil, fmt.Errorf("predicate %q (%s) is not supported (safe_cross_scheme, previous_routes)", pr.GetName(), tc.GetTypeUrl())
		}
	}
	if p.GetResponseHeadersToCopy() != nil {
		return nil, errors.New("response_headers_to_copy is not supported")
	}
	return spec, nil
}
