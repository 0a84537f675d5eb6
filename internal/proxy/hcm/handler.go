package hcm

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// Handler is the connection manager of one listener: it serves
// the requests its listener hands it with the chain they came in on.
type Handler struct {
	env      *Env
	listener string // the listener's name
}

// exchange collects what the access log and metrics report about a request.
type exchange struct {
	vhost    string           // the virtual host's name, "" until matched: what filters read, apart from logged (a miss at 10,000 hosts)
	logged   *accesslog.Route // where the access log says it was routed; nil: no virtual host matched
	route    *router.Route    // nil: none matched
	stats    *RouteStats
	cluster  string
	upstream *upstream.Stats // nil unless the request was forwarded
	attempts int             // upstream attempts made (0 for local replies)
	// info: the upstream host of the last attempt, why the proxy answered
	// itself (when it says more than the status), and what header values
	// read of the exchange.
	info    router.StreamInfo
	headers *router.RouteHeaders // the route's header mutations and cookies; nil: none
	// routeHeaders is where headers points once set: every route of Portico's
	// changes headers (its Server header), so it comes with the exchange
	// instead of in an allocation of its own.
	routeHeaders router.RouteHeaders
}

// stream is what Serve keeps of a request, in one allocation: its exchange,
// response writer and routing view. An internal redirect starts a new
// exchange in the same place and keeps the others.
type stream struct {
	ex exchange
	rw responseWriter
	ri router.RequestInfo
}

// keptStream is the stream an HTTP/1.1 connection keeps from one request to
// the next (HTTP/2 streams share a pool of them), with the upstream target
// and filter stream its request may use once (an internal redirect's request
// gets its own): allocating them anew for every request cost more than
// collecting them, since new memory is cold in the cache. A request's stream
// is kept only once nothing holds it (quiet).
type keptStream struct {
	stream
	target  upstreamTarget
	filters filter.Stream
	// The target's room for its upstream request's header and for its
	// responses, kept emptied from request to request.
	header   headerBuf
	response upstream.ResponseRoom
	// targetTaken and filtersTaken: the request's first forward and filter
	// stream took them.
	targetTaken, filtersTaken bool
	// out is the upstream request of the forward that took target, with
	// target as its context (upstreamrequest.go); nil until the first.
	out *http.Request
	// pool is the environment's pool, where Release puts the stream.
	pool *sync.Pool
}

// keeper is a response writer whose connection keeps what a handler leaves
// in its slot for the connection's next request (the HTTP/1.1 codec's), and
// releases it when the connection ends.
type keeper interface{ Kept() *any }

// keptStreamFor returns the stream for a request written to w: the one w's
// connection kept, emptied, or one from the environment's pool, or a new one;
// slot is where it is kept again once the request is over. When w's
// connection keeps nothing (HTTP/2, whose streams each have a writer of their
// own), slot is nil: the stream goes back to the pool.
func (e *Env) keptStreamFor(w http.ResponseWriter) (k *keptStream, slot *any) {
	if kw, ok := w.(keeper); ok {
		slot = kw.Kept()
		k, _ = (*slot).(*keptStream)
		*slot = nil
	}
	if k == nil {
		k, _ = e.streams.Get().(*keptStream)
	}
	if k == nil {
		k = new(keptStream)
	} else {
		k.empty()
	}
	k.rw.kept, k.pool = k, &e.streams
	return k, slot
}

// Release is called by the HTTP/1.1 codec for the stream its connection
// kept, once the connection ended: nothing of it reads the stream any more
// (its last head and trailers are written), and only a quiet stream is kept
// (keep), so a request of another connection may take it. A new connection
// per request then allocates none.
func (k *keptStream) Release() { k.pool.Put(k) }

// keep keeps the stream of the request r, served, for a later request: in
// slot, or in the environment's pool without one. A stream something may
// still reach is dropped instead (quiet).
func (e *Env) keep(k *keptStream, slot *any, r *http.Request) {
	if !k.quiet(r) {
		return
	}
	if slot == nil && (!k.rw.headerSent.Load() || len(k.rw.Header()["Trailer"]) > 0) {
		// Go's HTTP/2 server reads the handler's header map after the handler
		// returns: all of it for the head of a handler that wrote none, the
		// declared trailers' fields otherwise. Their values may be the
		// stream's (rw.edge's, the response room's: a trailer the upstream
		// declared and did not send keeps the header field's value), which
		// another stream could have taken by then. Undeclared trailers' are
		// always copies (proxy, bodySink.Close).
		return
	}
	k.forget()
	if slot != nil {
		*slot = k
	} else {
		e.streams.Put(k)
	}
}

// quiet reports whether nothing holds the stream of the request r, served:
// no body still read by a transport, no spliced upgrade, and a target (if
// one was used) that nothing the forward started can reach (settle).
func (k *keptStream) quiet(r *http.Request) bool {
	if requestHasBody(r) || k.rw.status == http.StatusSwitchingProtocols {
		return false
	}
	return !k.targetTaken || k.target.quiet
}

// forget drops what the stream holds of its request (its route, cluster,
// configuration, upstream connection), which an idle connection would
// otherwise keep alive, but for the values of the response's Server and
// X-Request-Id fields: the codec's header map holds them, and writes a head
// it held back after the handler returns.
func (k *keptStream) forget() {
	edge := k.rw.edge
	k.empty()
	k.rw.edge = edge
	k.header.forget()
	k.response.Forget() // which keeps the response's header values too
	k.forgetUpstreamRequest()
}

// empty makes the stream, target and filter stream new; the rooms keep what
// they hold.
func (k *keptStream) empty() {
	k.stream, k.target, k.filters = stream{}, upstreamTarget{}, filter.Stream{}
	k.targetTaken, k.filtersTaken = false, false
}

// headersFor returns the request's routeHeaders, set up in the exchange on
// first use and shared with the response writer, which applies them to local
// replies.
func (ex *exchange) headersFor(rw *responseWriter, r *http.Request, ri *router.RequestInfo) *router.RouteHeaders {
	if ex.headers == nil {
		ex.routeHeaders = *router.NewRouteHeaders(nil, r, ri, &rw.hcm.Client)
		ex.routeHeaders.Stream = &ex.info
		ex.headers = &ex.routeHeaders
		rw.headers = ex.headers
	}
	return ex.headers
}

// Serve serves a request that came in at start on a chain of lc, the
// listener's configuration loaded once for the whole request, whatever swaps
// happen meanwhile.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, start time.Time, lc *Listener, chain *Chain) {
	hcm := chain.Spec
	if hcm.ProtoMajor != 0 && r.ProtoMajor != hcm.ProtoMajor {
		// A codec limited to one version cannot read the other: Envoy drops the
		// connection (the HTTP/2 stream) without an answer, and so does the proxy.
		panic(http.ErrAbortHandler)
	}
	k, slot := h.env.keptStreamFor(w)
	h.serve(&k.stream, w, r, start, lc, chain)
	h.env.keep(k, slot, r)
}

// serve is Serve's, on the request's stream s. A panic (an aborted response)
// leaves it before Serve keeps the stream, which is then not reused.
func (h *Handler) serve(s *stream, w http.ResponseWriter, r *http.Request, start time.Time, lc *Listener, chain *Chain) {
	hcm := chain.Spec
	ex, rw, ri := &s.ex, &s.rw, &s.ri
	*ex = exchange{stats: chain.Stats.NoVhost}
	rw.ResponseWriter, rw.hcm, rw.requestID, rw.grpc, rw.start = w, hcm, requestID(hcm, r), isGRPCRequest(r), start
	ex.info.Certificates = lc.Certificates
	http10Host(hcm.http1, r)
	setRequestInfo(ri, hcm, r)
	defer h.finish(r, ri, rw, ex, start)

	if refuseHTTP10(hcm.http1, rw, r, ex) {
		return
	}
	if reason := headerLimitExceeded(hcm, r); reason != "" {
		h.env.metrics.headersRefusedFor(reason)
		refuseHeaders(rw, r, ex, reason)
		return
	}

	h.dispatch(rw, r, lc, chain, ri, ex, nil)
	if rw.body != nil {
		rw.closeBody()
	}
}

// dispatch routes a request and serves it: the filters, then the route's
// action. An internal redirect dispatches the redirected request again
// (redirects says what it went through; nil for a request as it came).
func (h *Handler) dispatch(rw *responseWriter, r *http.Request, lc *Listener, chain *Chain, ri *router.RequestInfo, ex *exchange, redirects *redirectState) {
	hcm := chain.Spec
	upgrade := upgradeType(r)
	if upgrade == "h2c" {
		// Like Envoy, ignore an HTTP/2 upgrade offer and carry on in HTTP/1.1
		// (h2c is served with prior knowledge only).
		stripUpgrade(r)
		upgrade = ""
	}
	vh := chain.Routes.SelectVirtualHost(ri.Authority)
	var rt *router.Route
	if vh != nil {
		// What a request reads of its virtual host and route is cold in the
		// cache when there are thousands: only what the outcome needs.
		vs := &chain.Stats.Vhosts[vh.Slot]
		ex.vhost = vh.Name
		if rt = vh.SelectRoute(ri); rt != nil {
			ex.route, ex.logged, ex.stats = rt, rt.Logged, vs.Routes[rt.Index]
			if rt.Plan != nil {
				// From here on every response carries the route's headers.
				ex.headersFor(rw, r, ri).Plan = rt.Plan
			}
		} else {
			ex.logged, ex.stats = vh.Logged, vs.NoRoute
		}
	}
	// As in Envoy, the route is known when the upgrade is checked: its
	// upgrade_configs override the HCM's.
	if upgrade != "" && !upgradeAllowed(hcm, rt, upgrade) {
		if rt != nil && rt.Forward == nil {
			rw.headers = nil // Envoy's connection manager adds only a forwarding route's
		}
		localReply(rw, http.StatusForbidden, "") // Envoy's "upgrade_failed"
		return
	}
	if hcm.Filters != nil && h.runFilters(hcm.Filters, rw, r, ri, rt, ex) {
		return
	}
	if rt == nil {
		localReply(rw, http.StatusNotFound, "")
		return
	}
	switch {
	case rt.Direct != nil:
		if loc := directResponseLocation(rt.Direct.Status, ri); loc != "" {
			rw.Header().Set("Location", loc)
		}
		localReply(rw, rt.Direct.Status, string(rt.Direct.Body))
	case rt.Redirect != nil:
		rw.Header().Set("Location", redirectLocation(rt, ri, forwardedProto(hcm, r, ri.Scheme)))
		rw.local = true
		rw.WriteHeader(rt.Redirect.Status)
	default:
		h.forward(rw, r, lc, chain, rt, ri, ex, redirects)
	}
}

// runFilters passes the request through the connection manager's HTTP
// filters; it reports whether one of them answered it. Without a route the
// filters run too, as in Envoy, and the router then answers 404.
func (h *Handler) runFilters(c *filter.Chain, rw *responseWriter, r *http.Request, ri *router.RequestInfo, rt *router.Route, ex *exchange) bool {
	var perFilter filter.PerFilter
	if rt != nil {
		perFilter = rt.PerFilter
	}
	hdr := filter.HeaderMap(r.Header)
	idle, encodes := c.IdleFor(perFilter, hdr), c.BodyEncodingFor(perFilter, hdr)
	if idle && !encodes {
		return false
	}
	s := h.newStream(rw, r, ri, rt, ex)
	if encodes {
		rw.enc, rw.perFilter = s, perFilter
	}
	if idle {
		return false
	}
	if requestHasBody(r) {
		fb := &filterBody{src: r.Body, timeout: filterIdleTimeout(rt, rw.hcm), rw: rw}
		defer fb.stop()
		s.SetBody(fb, r.ContentLength)
	}
	lr := c.Decode(s, perFilter)
	if body, length, changed := s.ForwardBody(r.Body); changed { // what filters read or replaced goes upstream
		r.Body = readCloser{body, r.Body}
		r.ContentLength = length
	}
	rw.filterHeaders = s.ResponseHeaders()
	if lr == nil {
		return false
	}
	h.env.metrics.filterReply(lr.Filter, lr.Status)
	if lr.Bare || (rt != nil && rt.Forward == nil) {
		rw.headers = nil // Envoy's local replies get only a forwarding route's
	}
	setHeaders(rw.Header(), lr.Headers)
	ex.info.Details = lr.Details
	rw.replyFilter = lr.Filter
	rw.grpcStatus = lr.GRPCStatus
	localReply(rw, lr.Status, lr.Body)
	return true
}

// setHeaders sets or adds the headers filters asked for.
func setHeaders(h http.Header, hs []filter.HeaderValue) {
	for _, hv := range hs {
		if hv.Overwrite {
			h.Set(hv.Name, hv.Value)
		} else {
			h.Add(hv.Name, hv.Value)
		}
	}
}

// newStream is the request's passage through the HTTP filters: the
// decoders' and the encoders'.
func (h *Handler) newStream(rw *responseWriter, r *http.Request, ri *router.RequestInfo, rt *router.Route, ex *exchange) *filter.Stream {
	var s *filter.Stream
	if k := rw.kept; k != nil && !k.filtersTaken {
		s, k.filtersTaken = &k.filters, true
	} else {
		s = new(filter.Stream)
	}
	s.Start(r.Context(), h.env.filterEnv)
	s.Request = filter.Request{
		Method:    ri.Method,
		Scheme:    ri.Scheme,
		Authority: ri.Authority,
		Path:      ri.Path,
		RawQuery:  ri.RawQuery,
		Headers:   filter.HeaderMap(r.Header), // net/http's map is canonical already
		TLS:       r.TLS,
		RequestID: rw.requestID,
	}
	s.Request.Peer, s.Request.Client = downstreamAddrs(rw.hcm, rw.ResponseWriter, r)
	if rt != nil {
		s.Route = filter.Route{VirtualHost: ex.vhost, Name: rt.Name, Matched: true}
		if rt.RateLimits != nil {
			s.Route.RateLimits = rt.RateLimits
		}
	}
	return s
}

// downstreamAddrs are the connection's peer and the client's address as the
// connection manager decides it (Envoy's direct_remote_ip and remote_ip).
func downstreamAddrs(hcm *Spec, w http.ResponseWriter, r *http.Request) (peer netip.AddrPort, client netip.Addr) {
	if p, ok := w.(interface{ RemoteAddrPort() netip.AddrPort }); ok {
		peer = p.RemoteAddrPort() // parsed once for the connection's requests
	} else {
		peer, _ = netip.ParseAddrPort(r.RemoteAddr)
	}
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	if a, ok := hcm.Client.ForwardedClient(r.Header["X-Forwarded-For"]); ok {
		return peer, a
	}
	return peer, peer.Addr()
}

// forward proxies the request to an endpoint of the route's cluster. The
// cluster is chosen once; attemptTransport makes the attempts (retries pick
// an endpoint again).
func (h *Handler) forward(rw *responseWriter, r *http.Request, lc *Listener, chain *Chain, rt *router.Route, ri *router.RequestInfo, ex *exchange, redirects *redirectState) {
	fa := rt.Forward
	wc := fa.PickCluster()
	ex.cluster = wc.Name
	if wc.Plan != nil {
		// The picked cluster's own mutations, with the route's.
		ex.headersFor(rw, r, ri).Plan = wc.Plan
	}
	cl, _ := lc.Clusters.Get(ex.cluster)
	if cl == nil {
		body := ""
		if fa.NotFoundStatus == http.StatusServiceUnavailable {
			body = "no healthy upstream"
		}
		ex.info.ResponseFlags, ex.info.Details = "NC", "cluster_not_found"
		localReply(rw, fa.NotFoundStatus, body)
		return
	}
	var pc upstream.PickContext
	if cl.LB.UsesHash() {
		var cookies []string
		if pc, cookies = router.HashRequest(fa.HashPolicies, r, ri); cookies != nil {
			ex.headersFor(rw, r, ri).Cookies = cookies
		}
	}
	endpoint, ok := cl.Pick(pc)
	if !ok {
		ex.info.ResponseFlags, ex.info.Details = "UH", "no_healthy_upstream"
		localReply(rw, http.StatusServiceUnavailable, "no healthy upstream")
		return
	}
	ex.info.UpstreamHost = cl.Endpoints[endpoint]
	ex.upstream = cl.Stats

	ctx, cancel := context.WithCancelCause(r.Context())
	t := h.newTarget(rw, r, rt, ri, ex, cl, endpoint, pc)
	t.inner, t.cancel = ctx, cancel
	defer t.settle(r, fa) // last: after every step below that stops what reaches t
	defer t.cancelWith(nil)
	defer func() {
		// Deferred: ReverseProxy panics (ErrAbortHandler) when the route
		// timeout cuts a response that had started.
		if errors.Is(context.Cause(ctx), errRouteTimeout) {
			cl.Stats.TimedOut()
		}
	}()
	t.host = upstreamHost(ri.Authority, wc.HostRewrite, fa.HostRewrite)
	t.hostHeader = fa.HostRewriteHeader
	if d := rw.hcm.Xfcc; d != nil && r.TLS != nil {
		t.xfcc = d.header(r.TLS, lc.Certificates.ServedCertificate(r.TLS.ServerName))
	}
	if len(fa.Mirrors) > 0 {
		h.mirror(r, fa, t)
	}
	if fa.InternalRedirect != nil && headerValue(r.Header, "Upgrade") == "" {
		t.redirect = &pendingRedirect{h: h, rw: rw, r: r, lc: lc, chain: chain, rt: rt, ri: ri, ex: ex, state: redirects, t: t}
	}
	if c := rw.hcm.Filters; c != nil {
		pf := filter.Merge(wc.PerFilter, rt.PerFilter)
		// A selective body encoder (gRPC-Web) runs when it picked the request
		// as it was decoded: then the request has its stream, rw.enc.
		var picked filter.Headers = filter.HeaderMap(nil) // no request: no pick
		if rw.enc != nil {
			picked = nil
		}
		bodyEncodes := c.BodyEncodingFor(pf, picked)
		if c.Encoding(pf) || bodyEncodes {
			s := rw.enc
			if s == nil {
				s = h.newStream(rw, r, ri, rt, ex)
			}
			if c.Encoding(pf) {
				t.encode = func(h http.Header) { c.Encode(s, pf, filter.HeaderMap(h)) }
			}
			rw.enc, rw.perFilter = s, pf
		}
		if !bodyEncodes {
			rw.enc = nil // the picked cluster's configuration turned them off
		}
	}
	t.startTimeouts(rw, fa)
	defer t.stopTimeouts()
	t.watchClientGone(rw)
	defer t.unwatchClientGone()
	var out *http.Request
	if k := rw.kept; k != nil && t == &k.target {
		out = k.upstreamRequest(r)
	} else {
		out = r.WithContext(t)
	}
	switch {
	case redirects != nil && redirects.body != nil:
		// A redirect's target: the body, received whole, is sent from the buffer.
		t.replay = redirects.body
		t.done.complete()
	case requestHasBody(r):
		out.Body = &requestBody{ReadCloser: r.Body, remaining: r.ContentLength, idle: t.idle, done: t.done, trailer: r.Trailer, hcm: rw.hcm}
		defer t.startRequestTimeout(rw)()
		if t.redirect != nil {
			t.replay = newReplayBuffer(out.Body)
		}
	default:
		t.done.complete()
	}
	if t.redirect != nil {
		t.redirect.body = t.replay
	}
	h.env.proxy(rw, out)
}

// newTarget describes the upstream side of a forwarded request.
func (h *Handler) newTarget(rw *responseWriter, r *http.Request, rt *router.Route, ri *router.RequestInfo, ex *exchange,
	cl *upstream.Cluster, endpoint int, pc upstream.PickContext) *upstreamTarget {
	path := ri.Path
	switch fa := rt.Forward; {
	case fa.HasPrefixRewrite:
		path = fa.PrefixRewrite + path[rt.Match.MatchedPrefixLen(path):]
	case fa.RegexRewrite != nil:
		path = fa.RegexRewrite.Apply(path)
	}
	var t *upstreamTarget
	var header *headerBuf
	var room *upstream.ResponseRoom
	if k := rw.kept; k != nil && !k.targetTaken {
		t, header, room, k.targetTaken = &k.target, &k.header, &k.response, true
	} else {
		t = new(upstreamTarget)
	}
	*t = upstreamTarget{
		header:      header,
		room:        room,
		cluster:     cl,
		endpointIdx: int32(endpoint),
		endpoint:    cl.Endpoints[endpoint],
		path:        path,
		host:        ri.Authority,
		rawQuery:    ri.RawQuery,
		scheme:      forwardedProto(rw.hcm, r, ri.Scheme),
		xff:         forwardedFor(rw.hcm, r),
		requestID:   rw.requestID,
		retry:       rt.Forward.Retry,
		pick:        pc,
		ex:          ex,
		rw:          rw,
	}
	t.done = &t.doneState
	return t
}

// startTimeouts starts the stream idle timeout and arms the route timeout
// for when the request is complete; stopTimeouts stops both.
func (t *upstreamTarget) startTimeouts(rw *responseWriter, fa *router.ForwardAction) {
	t.idle = t.idleState.run(idleTimeoutFor(fa, rw.hcm), t)
	rw.idle = t.idle
	if fa.HasIdleTimeout {
		setWriteIdleTimeout(t.inner, rw.ResponseWriter, fa.IdleTimeout)
	}
	if fa.Timeout > 0 {
		// Envoy's route timeout starts when the downstream request is
		// complete: a slow upload does not count against it.
		t.timer = &t.routeState
		t.timer.timeout, t.timer.cancel, t.timer.cause = fa.Timeout, t, errRouteTimeout
		t.done.onComplete(t.timer)
	}
}

func (t *upstreamTarget) stopTimeouts() {
	t.idle.stop()
	t.timer.stop()
}

// idleExpired ends a stream that has been idle too long: the request is
// cancelled (408 if the response head was not sent yet, a reset otherwise),
// and reads of a stalled upload or writes to a stalled client are unblocked.
// It runs on the idle timer's goroutine, which stops before forward returns.
func (t *upstreamTarget) idleExpired() {
	rw := t.rw
	// Look before cancelling: once cancelled, the handler may write the 408,
	// which must not be mistaken for a response in progress.
	uploading, responding := !t.done.isComplete(), rw.headerSent.Load()
	t.cancelWith(errStreamIdleTimeout)
	rc := http.NewResponseController(rw.ResponseWriter)
	if uploading {
		_ = rc.SetReadDeadline(time.Now())
	}
	if responding {
		_ = rc.SetWriteDeadline(time.Now())
	}
}

// errRouteTimeout is the cancellation cause of a request whose route timeout
// expired.
var errRouteTimeout = errors.New("route timeout")

// routeTimer is a route or per-try timeout, armed once the downstream
// request is complete. A nil *routeTimer is a disabled timeout.
type routeTimer struct {
	timeout time.Duration
	cancel  canceller
	cause   error

	mu      sync.Mutex
	timer   *pooledTimer
	stopped bool
	// disturbed: its timer went off, and a call may still reach it.
	disturbed bool
}

// arm starts the timeout; only the first call counts.
func (rt *routeTimer) arm() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.timer != nil || rt.stopped {
		return
	}
	rt.timer = startTimer(rt.timeout, rt)
}

// completed arms the timeout once the downstream request is complete.
func (rt *routeTimer) completed() { rt.arm() }

func (rt *routeTimer) expire() { rt.cancel.cancelWith(rt.cause) }

// stop disarms the timeout when the exchange is over: the transport may still
// read (and so arm) the body afterwards. It may be called more than once (a
// per-try timeout's delivery and end, an internal redirect's run and forward):
// the pooled timer is released by the first call only, since by the second it
// may be another request's.
func (rt *routeTimer) stop() {
	if rt == nil {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.stopped = true
	if rt.timer != nil {
		rt.disturbed = !rt.timer.release()
		rt.timer = nil
	}
}

// requestHasBody reports whether a downstream request carries a body that
// the upstream request will read.
func requestHasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// upstreamHost is the Host sent upstream: the request's, or a
// host_rewrite_literal, the route's winning over the weighted cluster's.
func upstreamHost(host, clusterRewrite, routeRewrite string) string {
	switch {
	case routeRewrite != "":
		return routeRewrite
	case clusterRewrite != "":
		return clusterRewrite
	}
	return host
}

// upgradeAllowed decides an upgrade as Envoy does: the route's
// upgrade_configs entry for the type, when it has one, else the HCM's.
func upgradeAllowed(hcm *Spec, rt *router.Route, upgrade string) bool {
	if rt != nil && rt.Forward != nil {
		for _, u := range rt.Forward.Upgrades {
			if u.UpgradeType == upgrade {
				return u.Enabled
			}
		}
	}
	return slices.Contains(hcm.Upgrades, upgrade)
}

// finish writes the access log line and records metrics. It runs deferred so
// that requests aborted by ReverseProxy (panic(http.ErrAbortHandler)) are
// accounted for too.
func (h *Handler) finish(r *http.Request, ri *router.RequestInfo, rw *responseWriter, ex *exchange, start time.Time) {
	elapsed := time.Since(start)
	status := rw.status
	if status == 0 {
		status = http.StatusOK // net/http writes 200 for handlers that wrote nothing
	}
	ex.stats.Observe(status, elapsed.Seconds(), rw.bytes)
	if ex.upstream != nil {
		ex.upstream.Request(status)
	}
	if !rw.hcm.AccessLog || !h.env.AccessLog.Enabled(r.Context()) {
		return
	}
	e := &accesslog.Entry{
		Ctx:          r.Context(),
		Time:         start.Add(elapsed),
		Listener:     h.listener,
		Method:       r.Method,
		Authority:    ri.Authority,
		URL:          *r.URL,
		Proto:        r.Proto,
		Status:       status,
		Elapsed:      elapsed,
		Bytes:        rw.bytes,
		Cluster:      ex.cluster,
		UpstreamHost: ex.info.UpstreamHost,
		Attempts:     ex.attempts,
		RequestID:    rw.requestID,
		Routed:       ex.logged,
		RemoteAddr:   r.RemoteAddr,
		UpstreamErr:  rw.upstreamErr,
		Details:      ex.info.Details,
	}
	if ex.upstream != nil {
		e.Service = ex.upstream.Label
	}
	h.env.AccessLog.Add(e)
}

func newRequestInfo(hcm *Spec, r *http.Request) *router.RequestInfo {
	ri := new(router.RequestInfo)
	setRequestInfo(ri, hcm, r)
	return ri
}

// setRequestInfo fills ri, the request r as routing sees it.
func setRequestInfo(ri *router.RequestInfo, hcm *Spec, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	*ri = router.RequestInfo{
		Method:    r.Method,
		Scheme:    scheme,
		Authority: requestHost(hcm, r),
		Path:      routingPath(hcm, r.URL.EscapedPath()),
		RawQuery:  r.URL.RawQuery,
		Header:    r.Header,
		Client:    &hcm.Client,
	}
}

// requestHost is the Host as the connection manager leaves it, for routing and
// upstream: without its port under strip_any_host_port (except a CONNECT's,
// whose authority must name one), without a trailing dot of its name under
// strip_trailing_host_dot, and otherwise as the client sent it.
func requestHost(hcm *Spec, r *http.Request) string {
	host := r.Host
	if hcm.stripTrailingDot {
		host = stripTrailingDot(host)
	}
	if hcm.StripAnyHostPort && r.Method != http.MethodConnect {
		host = router.StripPort(host)
	}
	return host
}

// stripTrailingDot removes the dot that ends a host's name, before its port if
// it has one ("foo.com.:8080" is "foo.com:8080"), as Envoy does.
func stripTrailingDot(host string) string {
	if h, ok := strings.CutSuffix(host, "."); ok {
		return h
	}
	i := strings.LastIndexByte(host, ':')
	if i > 0 && host[i-1] == '.' && !strings.Contains(host[i:], ".") {
		return host[:i-1] + host[i:]
	}
	return host
}

// routingPath is the path routes are matched against and that is sent
// upstream: escaped, without the query, normalized as the HCM says.
func routingPath(hcm *Spec, escaped string) string {
	if escaped == "" {
		escaped = "/"
	}
	if hcm.NormalizePath {
		escaped = router.RemoveDotSegments(escaped)
	}
	if hcm.mergeSlashes {
		escaped = router.MergeSlashes(escaped)
	}
	return escaped
}

// requestID returns the X-Request-Id of a request: a fresh UUIDv4 unless the
// HCM preserves a client-supplied one or does not generate ids.
func requestID(hcm *Spec, r *http.Request) string {
	existing := headerValue(r.Header, "X-Request-Id")
	if existing != "" && (hcm.PreserveRequestID || !hcm.GenerateRequestID) {
		return existing
	}
	if !hcm.GenerateRequestID {
		return ""
	}
	return NewRequestID()
}

// NewRequestID returns a random UUIDv4, as Envoy generates for every request.
// The bits come from the runtime's per-thread ChaCha8 generator (as Envoy's
// come from its own non-blocking generator): unpredictable, without the
// system call and lock of crypto/rand on every request.
func NewRequestID() string {
	var id uuid.UUID
	binary.LittleEndian.PutUint64(id[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(id[8:], rand.Uint64())
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id.String()
}

// forwardedFor appends the client address to X-Forwarded-For when the proxy
// is the edge (use_remote_address), as Envoy does; otherwise the header
// passes through unchanged.
func forwardedFor(hcm *Spec, r *http.Request) string {
	prior := strings.Join(r.Header["X-Forwarded-For"], ", ")
	if !hcm.Client.UseRemoteAddress || hcm.SkipXFFAppend {
		return prior
	}
	client, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		client = r.RemoteAddr
	}
	if prior == "" {
		return client
	}
	return prior + ", " + client
}

// forwardedProto is the downstream scheme at the edge; behind another proxy,
// or behind trusted hops (xff_num_trusted_hops, as in Envoy), a client-supplied
// X-Forwarded-Proto is kept.
func forwardedProto(hcm *Spec, r *http.Request, scheme string) string {
	if !hcm.Client.UseRemoteAddress || hcm.Client.XFFTrustedHops > 0 {
		if v := headerValue(r.Header, "X-Forwarded-Proto"); v != "" {
			return v
		}
	}
	return scheme
}

// upgradeType returns the lower-cased Upgrade protocol of an HTTP/1.1
// upgrade request, or "".
func upgradeType(r *http.Request) string {
	if r.ProtoMajor != 1 || !headerHasToken(r.Header["Connection"], "upgrade") {
		return ""
	}
	return strings.ToLower(headerValue(r.Header, "Upgrade"))
}

// stripUpgrade removes an upgrade offer so that the request is forwarded as a
// plain one. Connection stays until prepareUpstream removes it with the
// fields it names (an upgrade needs Upgrade too).
func stripUpgrade(r *http.Request) {
	r.Header.Del("Upgrade")
	r.Header.Del("Http2-Settings")
}

// headerHasToken reports whether a comma-separated header contains token
// (case-insensitively).
func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// redirectLocation builds the Location of a redirect route; proto is the
// request's X-Forwarded-Proto as the connection manager sets it.
func redirectLocation(rt *router.Route, ri *router.RequestInfo, proto string) string {
	ra := rt.Redirect
	scheme := ri.Scheme
	if ra.Scheme != "" {
		scheme = ra.Scheme
	}
	host := ra.Host
	if host == "" {
		host = redirectRequestHost(ri.Authority, scheme, proto)
	}
	if ra.Port != 0 {
		host = router.StripPort(host) + ":" + strconv.FormatUint(uint64(ra.Port), 10)
	}
	path, query := ri.Path, ri.RawQuery
	stripQuery := ra.StripQuery
	switch {
	case ra.HasPath:
		path = ra.Path
		if i := strings.IndexByte(path, '?'); i >= 0 {
			// Envoy: a path_redirect's own query replaces the request's and is
			// kept whatever strip_query says.
			path, query, stripQuery = path[:i], path[i+1:], false
		}
	case ra.HasPrefixRewrite:
		path = ra.PrefixRewrite + ri.Path[rt.Match.MatchedPrefixLen(ri.Path):]
	case ra.RegexRewrite != nil:
		path = ra.RegexRewrite.Apply(ri.Path)
	}
	if stripQuery {
		query = ""
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	loc := scheme + "://" + host + path
	if query != "" {
		loc += "?" + query
	}
	return loc
}

// redirectRequestHost is the request's host as a redirect to scheme keeps it:
// with its port, except the default port of proto, the scheme the request came
// with, when the redirect changes the scheme ("http://foo.com:80" redirected to
// https is "https://foo.com"), as Envoy does.
func redirectRequestHost(host, scheme, proto string) string {
	if scheme == proto {
		return host
	}
	if (proto == "http" && strings.HasSuffix(host, ":80")) || (proto == "https" && strings.HasSuffix(host, ":443")) {
		return router.StripPort(host)
	}
	return host
}

// directResponseLocation is the Location Envoy gives a direct_response with
// status 201 or 3xx: the request's own URL. Other statuses get none.
func directResponseLocation(status int, ri *router.RequestInfo) string {
	if status != http.StatusCreated && (status < 300 || status > 399) {
		return ""
	}
	loc := ri.Scheme + "://" + ri.Authority + ri.Path
	if ri.RawQuery != "" {
		loc += "?" + ri.RawQuery
	}
	return loc
}

// localReply sends a response generated by the proxy itself. A Content-Type
// already set (a filter's reply, such as an authorization server's denial) is
// kept, as Envoy applies a filter's headers over its local reply's.
func localReply(w http.ResponseWriter, status int, body string) {
	if rw, ok := w.(*responseWriter); ok {
		rw.local = true
		if rw.grpc {
			rw.grpcLocalReply(status, body)
			return
		}
		rw.localBody = body
	}
	if body != "" {
		if headerValue(w.Header(), "Content-Type") == "" {
			w.Header().Set("Content-Type", "text/plain")
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	if body != "" {
		_, _ = w.Write([]byte(body))
	}
}

// responseWriter records the status and size for the access log and sets the
// Server and X-Request-Id response headers just before the head is written,
// after ReverseProxy has copied the upstream's headers (so Server is
// overwritten as Envoy does).
type responseWriter struct {
	http.ResponseWriter
	hcm         *Spec
	requestID   string
	status      int
	bytes       int64
	upstreamErr error
	// headerSent mirrors status != 0 for the idle timer's goroutine.
	headerSent atomic.Bool
	idle       *idleTimer // bytes sent are stream activity; nil for local replies
	// headers, once a route is chosen: its response mutations, which every
	// response gets (ReverseProxy's ModifyResponse applies them to the
	// upstream's, see withRouteHeaders, before they get here).
	headers *router.RouteHeaders
	// filterHeaders are the response headers the HTTP filters asked for.
	filterHeaders []filter.HeaderValue
	// enc is the request's filter stream when body encoders run on its route
	// (configured by perFilter); nil: none does. body is set once one of them
	// wraps the response's body.
	enc       *filter.Stream
	perFilter filter.PerFilter
	body      *encodedBody
	// local: the proxy answers itself (replyFilter: for that filter).
	local       bool
	replyFilter string
	// grpc: the request is gRPC's, and so are the proxy's own answers to it
	// (isGRPCRequest); grpcStatus, when not 0, is the gRPC status a filter's
	// reply asks for.
	grpc       bool
	grpcStatus int
	localBody  string              // a local reply's body, for the body encoders
	head       filter.ResponseHead // what the body encoders see of the response
	start      time.Time           // when the request arrived
	// edge holds the values of Server and X-Request-Id (decorate).
	edge [2]string
	// kept is the stream this writer is part of, kept by its connection
	// (HTTP/1.1) or pooled (HTTP/2): its target, filter stream and rooms are
	// the request's to take once. nil for a writer made otherwise (tests).
	kept *keptStream
}

// decorate sets the headers of the response head: the route's mutations
// (on local replies), then Server and X-Request-Id (when the connection
// manager returns it), which the connection manager sets after the router in
// Envoy.
func (w *responseWriter) decorate() {
	h := w.Header()
	if w.headers != nil && !w.headers.Responded {
		w.headers.ApplyResponse(h, false)
	}
	// Filters' encoders run after the router's changes in Envoy.
	setHeaders(h, w.filterHeaders)
	switch w.hcm.ServerHeader {
	case ServerHeaderOverwrite:
		w.setEdge(h, 0, "Server", w.hcm.ServerName)
	case ServerHeaderAppendIfAbsent:
		if headerValue(h, "Server") == "" {
			w.setEdge(h, 0, "Server", w.hcm.ServerName)
		}
	}
	if w.requestID != "" && w.hcm.ReturnRequestID {
		w.setEdge(h, 1, "X-Request-Id", w.requestID)
	}
}

// setEdge sets a field of the response head to v, its value in the writer's
// slot i (h.Set would allocate it): key is canonical.
func (w *responseWriter) setEdge(h http.Header, i int, key, v string) {
	w.edge[i] = v
	h[key] = w.edge[i : i+1 : i+1]
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	// Informational responses (other than 101) precede the real one.
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.status = code
	w.headerSent.Store(true)
	w.decorate()
	if w.enc != nil {
		w.encodeBody(code)
	}
	// A response without a Content-Type leaves without one, as from Envoy: net/http
	// would otherwise guess one from the first bytes written.
	if h := w.Header(); h["Content-Type"] == nil {
		h["Content-Type"] = nil
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.body != nil {
		return w.body.w.Write(b)
	}
	return w.send(b)
}

// send writes body bytes to the client, after the encoders.
func (w *responseWriter) send(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	if n > 0 {
		w.idle.touch()
	}
	return n, err
}

func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.body != nil {
		_ = w.body.w.Flush()
		return
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack serves protocol upgrades: ReverseProxy writes the 101 response
// itself on the hijacked connection, from the headers set here.
func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
		w.headerSent.Store(true)
		w.decorate()
	}
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
