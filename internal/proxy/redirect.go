package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	previousroutesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/internal_redirect/previous_routes/v3"
	safecrossschemev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/internal_redirect/safe_cross_scheme/v3"
)

// internalRedirectSpec is a route's internal_redirect_policy: the proxy follows
// the upstream's redirects itself, and the client gets the answer of their target.
type internalRedirectSpec struct {
	max   int   // max_internal_redirects (default 1)
	codes []int // redirect_response_codes (default 302)
	cross bool  // allow_cross_scheme_redirect
	// safeCrossScheme (predicate safe_cross_scheme): a redirect from HTTP to HTTPS is
	// not followed; previousRoutes (previous_routes): nor one to a route the request
	// has already been through.
	safeCrossScheme, previousRoutes bool
}

func convertInternalRedirect(p *routev3.InternalRedirectPolicy) (*internalRedirectSpec, error) {
	if p == nil {
		return nil, nil
	}
	spec := &internalRedirectSpec{max: 1, codes: []int{http.StatusFound}, cross: p.GetAllowCrossSchemeRedirect()}
	if m := p.GetMaxInternalRedirects(); m != nil {
		spec.max = int(m.GetValue())
	}
	if len(p.GetRedirectResponseCodes()) > 0 {
		spec.codes = spec.codes[:0]
		for _, c := range p.GetRedirectResponseCodes() {
			switch c {
			case 301, 302, 303, 307, 308:
				spec.codes = append(spec.codes, int(c))
			default:
				return nil, fmt.Errorf("redirect_response_codes: %d is not a redirect Envoy follows (301, 302, 303, 307, 308)", c)
			}
		}
	}
	for _, pr := range p.GetPredicates() {
		tc := pr.GetTypedConfig()
		switch {
		case tc.MessageIs(&safecrossschemev3.SafeCrossSchemeConfig{}):
			spec.safeCrossScheme = true
		case tc.MessageIs(&previousroutesv3.PreviousRoutesConfig{}):
			spec.previousRoutes = true
		default:
			return nil, fmt.Errorf("predicate %q (%s) is not supported (safe_cross_scheme, previous_routes)", pr.GetName(), tc.GetTypeUrl())
		}
	}
	if p.GetResponseHeadersToCopy() != nil {
		return nil, errors.New("response_headers_to_copy is not supported")
	}
	return spec, nil
}

// redirectState is what a request went through by internal redirects.
type redirectState struct {
	count   int
	visited []*route
}

// pendingRedirect is a forwarded request whose upstream redirect may be
// followed: everything needed to serve the redirected request in its place.
type pendingRedirect struct {
	h     *listenerHandler
	rw    *responseWriter
	r     *http.Request // as it came from the client
	lc    *listenerConfig
	chain *filterChain
	rt    *route
	ri    *requestInfo
	ex    *exchange
	state *redirectState
	t     *upstreamTarget // the redirected attempt's, whose timers stop
}

// errInternalRedirect, returned by ModifyResponse, has ReverseProxy drop the
// upstream's redirect and call its ErrorHandler, which serves the redirect's
// target instead (run).
type errInternalRedirect struct {
	p      *pendingRedirect
	target *url.URL
	status int
}

func (e *errInternalRedirect) Error() string { return "internal redirect to " + e.target.String() }

// follows decides, as Envoy does, whether the upstream's response is a
// redirect the proxy follows: a listed status, a Location that is an absolute
// http(s) URL, a scheme change only where allowed, fewer redirects than the
// maximum, and (previous_routes) a target route not already gone through.
func (p *pendingRedirect) follows(res *http.Response) *errInternalRedirect {
	spec := p.rt.forward.internalRedirect
	count := 0
	if p.state != nil {
		count = p.state.count
	}
	if !slices.Contains(spec.codes, res.StatusCode) || count >= spec.max {
		return nil
	}
	target, err := url.Parse(res.Header.Get("Location"))
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" || target.User != nil {
		return nil
	}
	if target.Scheme != p.ri.scheme {
		if !spec.cross || (spec.safeCrossScheme && p.ri.scheme == "http") {
			return nil
		}
	}
	if spec.previousRoutes {
		if next := p.targetRoute(target); next == p.rt || (p.state != nil && slices.Contains(p.state.visited, next)) {
			return nil
		}
	}
	return &errInternalRedirect{p: p, target: target, status: res.StatusCode}
}

// redirected is the client's request as it goes to target: its URL and Host
// replaced, x-envoy-original-url saying where it was going, and (303) a GET.
func (p *pendingRedirect) redirected(target *url.URL, status int) (*http.Request, *requestInfo) {
	r := p.r.Clone(p.r.Context())
	original := p.ri.scheme + "://" + p.ri.authority + p.ri.path
	if p.ri.rawQuery != "" {
		original += "?" + p.ri.rawQuery
	}
	r.Header.Set("X-Envoy-Original-Url", original)
	if status == http.StatusSeeOther && r.Method != http.MethodHead {
		r.Method = http.MethodGet
	}
	r.URL = &url.URL{Path: target.Path, RawPath: target.RawPath, RawQuery: target.RawQuery}
	r.Host = target.Host
	r.Body, r.ContentLength = http.NoBody, 0
	ri := newRequestInfo(p.chain.hcm, r)
	ri.scheme = target.Scheme
	return r, ri
}

// targetRoute is the route the redirect would reach; nil: none.
func (p *pendingRedirect) targetRoute(target *url.URL) *route {
	_, ri := p.redirected(target, 0)
	vh := p.chain.routes.selectVirtualHost(ri.authority)
	if vh == nil {
		return nil
	}
	return vh.selectRoute(ri)
}

// run serves the redirect's target in place of the upstream's redirect: the
// same response writer (nothing of the redirect was written) and exchange
// (one access log line, for the answer the client gets), routed afresh.
func (e *errInternalRedirect) run() {
	p := e.p
	r, ri := p.redirected(e.target, e.status)
	state := &redirectState{count: 1}
	if p.state != nil {
		state.count = p.state.count + 1
		state.visited = slices.Clone(p.state.visited)
	}
	state.visited = append(state.visited, p.rt)
	// The redirect's own timeouts end with it: the target's request has its own.
	p.t.idle.stop()
	p.t.timer.stop()
	p.rw.headers, p.rw.filterHeaders, p.rw.upstreamErr = nil, nil, nil
	ex := p.ex
	*ex = exchange{vhost: unmatchedLabel, stats: p.chain.stats.noVhost, attempts: ex.attempts}
	p.h.dispatch(p.rw, r, p.lc, p.chain, ri, ex, state)
}
