package dag

import (
	"slices"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// InternalRedirect has the proxy follow a route's upstream redirects itself, so the
// client gets the answer of the redirect's target (HTTPProxy internalRedirectPolicy).
type InternalRedirect struct {
	// MaxRedirects a request may follow; the next redirect reaches the client.
	MaxRedirects uint32
	// Codes are the statuses followed (301, 302, 303, 307, 308).
	Codes []uint32
	// CrossScheme: "Never" (the default), "Always", or "SafeOnly" (from HTTPS to
	// either scheme, from HTTP to HTTP only).
	CrossScheme string
	// DenyRepeatedRoute refuses a redirect to a route the request already went through.
	DenyRepeatedRoute bool
}

// validateInternalRedirect checks a route's internalRedirectPolicy.
func validateInternalRedirect(p *contourv1.HTTPInternalRedirectPolicy, field string, c *proxyCheck) {
	if p == nil {
		return
	}
	field += ".internalRedirectPolicy"
	for i, code := range p.RedirectResponseCodes {
		if !slices.Contains([]contourv1.RedirectResponseCode{301, 302, 303, 307, 308}, code) {
			c.fail(problemRoute, "InternalRedirectInvalid", "%s.redirectResponseCodes[%d] %d must be 301, 302, 303, 307 or 308", field, i, code)
		}
	}
	switch p.AllowCrossSchemeRedirect {
	case "", "Never", "Always", "SafeOnly":
	default:
		c.fail(problemRoute, "InternalRedirectInvalid", "%s.allowCrossSchemeRedirect %q must be Always, Never or SafeOnly", field, p.AllowCrossSchemeRedirect)
	}
}

// proxyInternalRedirect converts a valid internalRedirectPolicy; nil without one.
func proxyInternalRedirect(p *contourv1.HTTPInternalRedirectPolicy) *InternalRedirect {
	if p == nil {
		return nil
	}
	out := &InternalRedirect{MaxRedirects: p.MaxInternalRedirects, CrossScheme: p.AllowCrossSchemeRedirect, DenyRepeatedRoute: p.DenyRepeatedRouteRedirect}
	if out.MaxRedirects == 0 {
		out.MaxRedirects = 1 // Envoy's default
	}
	if out.CrossScheme == "" {
		out.CrossScheme = "Never"
	}
	for _, code := range p.RedirectResponseCodes {
		if !slices.Contains(out.Codes, uint32(code)) {
			out.Codes = append(out.Codes, uint32(code))
		}
	}
	if len(out.Codes) == 0 {
		out.Codes = []uint32{302}
	}
	return out
}
