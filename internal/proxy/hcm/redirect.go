package hcm

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/portico-dev/portico/internal/proxy/router"
)

// redirectState is what a request went through by internal redirects.
type redirectState struct {
	count   int
	visited []*router.Route
	// body is the request body, kept whole, that the target is sent; nil: none.
	body *replayBuffer
}

// pendingRedirect is a forwarded request whose upstream redirect may be
// followed: everything needed to serve the redirected request in its place.
type pendingRedirect struct {
	h     *Handler
	rw    *responseWriter
	r     *http.Request // as it came from the client
	lc    *Listener
	chain *Chain
	rt    *router.Route
	ri    *router.RequestInfo
	ex    *exchange
	state *redirectState
	t     *upstreamTarget // the redirected attempt's, whose timers stop
	// body keeps the request body (the attempts read it through) so that the
	// target can be sent it too; nil for a request without one.
	body *replayBuffer
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
// maximum, (previous_routes) a target route not already gone through, and a
// request body, if any, received whole within the buffer limit (1 MiB).
func (p *pendingRedirect) follows(res *http.Response) *errInternalRedirect {
	spec := p.rt.Forward.InternalRedirect
	count := 0
	if p.state != nil {
		count = p.state.count
	}
	if !slices.Contains(spec.Codes, res.StatusCode) || count >= spec.Max {
		return nil
	}
	target, err := url.Parse(headerValue(res.Header, "Location"))
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" || target.User != nil {
		return nil
	}
	if target.Scheme != p.ri.Scheme {
		if !spec.Cross || (spec.SafeCrossScheme && p.ri.Scheme == "http") {
			return nil
		}
	}
	if spec.PreviousRoutes {
		if next := p.targetRoute(target); next == p.rt || (p.state != nil && slices.Contains(p.state.visited, next)) {
			return nil
		}
	}
	if p.body != nil && !p.body.whole() {
		return nil // as in Envoy: a body past the buffer limit is not sent twice
	}
	return &errInternalRedirect{p: p, target: target, status: res.StatusCode}
}

// redirected is the client's request as it goes to target: its URL and Host
// replaced, x-envoy-original-url saying where it was going, and (303) a GET;
// without its body, which run gives it back from the buffer.
func (p *pendingRedirect) redirected(target *url.URL, status int) (*http.Request, *router.RequestInfo) {
	r := p.r.Clone(p.r.Context())
	original := p.ri.Scheme + "://" + p.ri.Authority + p.ri.Path
	if p.ri.RawQuery != "" {
		original += "?" + p.ri.RawQuery
	}
	r.Header.Set("X-Envoy-Original-Url", original)
	if status == http.StatusSeeOther && r.Method != http.MethodHead {
		r.Method = http.MethodGet
	}
	r.URL = &url.URL{Path: target.Path, RawPath: target.RawPath, RawQuery: target.RawQuery}
	r.Host = target.Host
	r.Body, r.ContentLength = http.NoBody, 0
	ri := newRequestInfo(p.chain.Spec, r)
	ri.Scheme = target.Scheme
	return r, ri
}

// targetRoute is the route the redirect would reach; nil: none.
func (p *pendingRedirect) targetRoute(target *url.URL) *router.Route {
	_, ri := p.redirected(target, 0)
	vh := p.chain.Routes.SelectVirtualHost(ri.Authority)
	if vh == nil {
		return nil
	}
	return vh.SelectRoute(ri)
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
	if p.body != nil && r.Method == p.r.Method {
		// The body goes along, unless a 303 made the request a GET.
		state.body = p.body
		r.Body, r.ContentLength = p.body.reader(nil), p.body.size()
	}
	// The redirect's own timeouts end with it: the target's request has its own.
	p.t.idle.stop()
	p.t.timer.stop()
	p.rw.headers, p.rw.filterHeaders, p.rw.upstreamErr = nil, nil, nil
	ex := p.ex
	*ex = exchange{stats: p.chain.Stats.NoVhost, attempts: ex.attempts}
	p.h.dispatch(p.rw, r, p.lc, p.chain, ri, ex, state)
}
