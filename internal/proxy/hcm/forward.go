package hcm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/router"
	"github.com/portico-dev/portico/internal/proxy/upstream"
)

// statusClientClosedRequest is logged (never sent) when the downstream client
// disconnects before the upstream answered.
const statusClientClosedRequest = 499

// upstreamTarget is what the Rewrite and dial functions need to know about the
// upstream chosen for one request. It travels in the request context (under
// upstreamTargetKey) because http.Transport keeps context values (not
// cancellation) when dialing.
type upstreamTarget struct {
	cluster  *upstream.Cluster
	endpoint string
	path     string // escaped path to send upstream
	host     string // Host header to send upstream
	// hostHeader (host_rewrite_header): the request header whose value, after
	// the header mutations, replaces host when present and not empty.
	hostHeader string
	rawQuery   string
	scheme     string // downstream scheme, for X-Forwarded-Proto
	xff        string // X-Forwarded-For to send; "" leaves it out
	xfcc       string // X-Forwarded-Client-Cert to send; "" leaves it out
	// encode runs the HTTP filters' encoders on the response's headers; nil: none.
	encode func(http.Header)
	// interims passes the upstream's interim (1xx) responses on until the
	// final response has come (GotInterim).
	interims interims
	// inner is the cancellable part of the upstream request's context, which
	// is the target itself (Value); cancel ends it, through cancelWith; aborts
	// stops the upstream exchange with it, when watching (abort.go).
	inner    context.Context
	cancel   context.CancelCauseFunc
	aborts   abortWatch
	notifier clientGoneNotifier // the codec telling of the client gone; nil: none
	watching bool
	// redirect, when set, may follow the response's redirect itself
	// (internal_redirect_policy).
	redirect *pendingRedirect
	// replay, when set before the round trip, is the request body kept for
	// an internal redirect (and then for retries too); nil: none kept yet.
	replay    *replayBuffer
	requestID string
	timer     *routeTimer // the route timeout; nil when there is none
	// edgeValues is the spare room upstreamHeader left in the upstream request's
	// header for the fields the connection manager sets.
	edgeValues []string
	// url is the upstream request's URL, which comes with the target rather
	// than in an allocation of its own.
	url url.URL
	// header and room, when not nil, are where the upstream request's header
	// and the responses are made (a kept stream's); nil: new allocations.
	header *headerBuf
	room   *upstream.ResponseRoom

	retry *router.RetryPolicy  // never nil
	pick  upstream.PickContext // for the retries' picks
	idle  *idleTimer           // nil when the idle timeout is disabled
	done  *completion          // the downstream request is complete
	ex    *exchange
	rw    *responseWriter // the client's: 1xx responses, the idle timeout's answer
	// Where done, idle and timer point when set, and the first attempt: they
	// come with the target rather than in allocations of their own.
	doneState  completion
	idleState  idleTimer
	routeState routeTimer
	first      attempt
	// Two int32s share a word: the struct stays in its allocation size class.
	endpointIdx int32 // the first attempt's endpoint
	attempts    int32
	// codecExchanged says the codec's client made an exchange for the
	// request, dialled that one of them dialled its connection
	// (CodecExchange); quiet, set when the forward is over, says that nothing
	// it started can reach the target any more (settle).
	codecExchanged bool
	dialled        bool
	quiet          bool
}

// ResponseRoom offers the codec's client the room the target's responses are
// built in (upstream.ResponseRoomer).
func (t *upstreamTarget) ResponseRoom() *upstream.ResponseRoom { return t.room }

// CodecExchange is told that the codec's client takes the request
// (upstream.CodecExchanger).
func (t *upstreamTarget) CodecExchange(dialled bool) {
	t.codecExchanged = true
	t.dialled = t.dialled || dialled
}

// settle records, once the forward of r is over, whether anything it started
// may still reach the target, which its stream's next request would otherwise
// reuse: a transport of Go's (which may hold its context in a dial) or the
// codec's client's dial (whose losing dual-stack attempt may still read it),
// a request body (its writer may outlive the response), a timer that went
// off (its call may be under way), a per-try timeout (an attempt's timer);
// and, not worth telling apart, retries, mirrors and internal redirects.
func (t *upstreamTarget) settle(r *http.Request, fa *router.ForwardAction) {
	t.quiet = t.codecExchanged && !t.dialled && t.attempts == 1 && t.cluster.Transport == nil &&
		t.retry.PerTryTimeout == 0 && !requestHasBody(r) && t.replay == nil &&
		len(fa.Mirrors) == 0 && t.redirect == nil &&
		!t.idleState.disturbed && !t.routeState.disturbed
}

// The target is also the forwarded request's context (ctx): its own
// cancellable context, inner, answering with itself for upstream.TargetKey,
// in the target's allocation rather than a context.WithValue of its own.
// Everything else is inner's, its cancelCtx included, so that context.Cause,
// context.AfterFunc and the contexts derived from it see inner's
// cancellation directly.

func (t *upstreamTarget) Deadline() (time.Time, bool) { return t.inner.Deadline() }
func (t *upstreamTarget) Done() <-chan struct{}       { return t.inner.Done() }
func (t *upstreamTarget) Err() error                  { return t.inner.Err() }

func (t *upstreamTarget) Value(key any) any {
	if _, ok := key.(upstream.TargetKey); ok {
		return t
	}
	return t.inner.Value(key)
}

func targetFrom(ctx context.Context) *upstreamTarget {
	t, _ := ctx.Value(upstream.TargetKey{}).(*upstreamTarget)
	return t
}

// UpstreamCluster is the cluster dials connect to (clusterTarget).
func (t *upstreamTarget) UpstreamCluster() *upstream.Cluster { return t.cluster }

// copyBufferSize is the size of the response copy buffers.
const copyBufferSize = 32 << 10

// copyBuffers lend the response copies their buffers: without them, every
// response allocates 32 KiB, which makes most of the garbage of a small request.
type copyBuffers struct{ pool sync.Pool }

func (b *copyBuffers) Get() []byte {
	if buf, ok := b.pool.Get().(*[copyBufferSize]byte); ok {
		return buf[:]
	}
	return make([]byte, copyBufferSize)
}

func (b *copyBuffers) Put(buf []byte) {
	if len(buf) == copyBufferSize {
		b.pool.Put((*[copyBufferSize]byte)(buf))
	}
}

// rewriteUpstreamRequest points the outgoing request at the chosen endpoint,
// sets the edge headers and applies the route's request headers. Hop-by-hop
// and X-Forwarded-* headers are already gone from out.
func rewriteUpstreamRequest(out *http.Request, t *upstreamTarget) {
	out.URL.Scheme = t.cluster.Scheme
	out.URL.Host = t.endpoint
	out.URL.Path, out.URL.RawPath = unescapedPath(t.path), t.path
	out.URL.RawQuery = t.rawQuery
	out.Host = t.host
	if t.xff != "" {
		setEdgeHeader(out.Header, &t.edgeValues, "X-Forwarded-For", t.xff)
	}
	setEdgeHeader(out.Header, &t.edgeValues, "X-Forwarded-Proto", t.scheme)
	if t.requestID != "" {
		setEdgeHeader(out.Header, &t.edgeValues, "X-Request-Id", t.requestID)
	}
	// Envoy never forwards a client certificate header it did not set
	// (SANITIZE); with SANITIZE_SET it sets its own.
	delete(out.Header, "X-Forwarded-Client-Cert")
	if t.xfcc != "" {
		setEdgeHeader(out.Header, &t.edgeValues, "X-Forwarded-Client-Cert", t.xfcc)
	}
	if t.ex.headers != nil {
		t.ex.headers.ApplyRequest(out.Header)
	}
	// As Envoy's route entry: the header is read once the mutations are done.
	if t.hostHeader != "" {
		if v := out.Header[t.hostHeader]; len(v) > 0 && v[0] != "" {
			out.Host = v[0]
		}
	}
}

// upstreamError maps failures before the response head to the contract's
// status codes: the route timeout and a last per-try timeout give 504, the
// stream idle and request timeouts 408, a retry without endpoint or a circuit
// breaker's overflow 503, anything else
// (refused, reset, connect timeout, malformed response) 502.
func (p *Env) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	var follow *errInternalRedirect
	if errors.As(err, &follow) {
		follow.run()
		return
	}
	rw, _ := w.(*responseWriter)
	if rw != nil {
		rw.upstreamErr = err
	}
	var refused *filter.ReplyError
	var malformed *downstreamBodyError
	cause := context.Cause(r.Context())
	switch {
	case errors.Is(cause, errRouteTimeout):
		outcome(r, "UT", "response_timeout")
		localReply(w, http.StatusGatewayTimeout, "upstream request timeout")
	case errors.Is(err, errPerTryTimeout) && r.Context().Err() == nil:
		outcome(r, "UT", "upstream_per_try_timeout")
		localReply(w, http.StatusGatewayTimeout, "upstream request timeout")
	case errors.Is(cause, errStreamIdleTimeout):
		outcome(r, "SI", "stream_idle_timeout")
		localReply(w, http.StatusRequestTimeout, "stream timeout")
	case upstream.IsOverflow(err):
		// A circuit breaker refused the request (Envoy's reset reason "overflow").
		w.Header().Set("X-Envoy-Overloaded", "true")
		outcome(r, "UO", "upstream_reset_before_response_started{overflow}")
		localReply(w, http.StatusServiceUnavailable, "upstream connect error or disconnect/reset before headers. reset reason: overflow")
	case errors.Is(cause, errRequestTimeout):
		localReply(w, http.StatusRequestTimeout, "request timeout")
	case errors.Is(err, errNoHealthyUpstream):
		outcome(r, "UH", "no_healthy_upstream")
		localReply(w, http.StatusServiceUnavailable, "no healthy upstream")
	case errors.As(err, &refused):
		filterBodyReply(w, r, &refused.Reply)
	case errors.Is(err, errConnect):
		// Envoy's routes match CONNECT only with a connect_matcher, which
		// Portico's never have: no route.
		outcome(r, "NR", "route_not_found")
		localReply(w, http.StatusNotFound, "")
	case errors.As(err, &malformed):
		if rw != nil {
			rw.Header().Set("Connection", "close")
		}
		outcome(r, "DPE", "http1.codec_error")
		localReply(w, malformed.codec.Status, "")
	case errors.Is(err, errRequestTrailersTooLarge):
		if rw != nil {
			rw.Header().Set("Connection", "close")
		}
		localReply(w, http.StatusRequestHeaderFieldsTooLarge, "")
	case r.Context().Err() != nil:
		// The client went away: nobody will read a reply, and counting a
		// 502 would blame the upstream. Log nginx's 499 instead.
		if rw != nil {
			rw.status = statusClientClosedRequest
		}
	default:
		reason := resetReason(err)
		outcome(r, resetFlag(reason), "upstream_reset_before_response_started{"+strings.ReplaceAll(reason, " ", "_")+"}")
		localReply(w, http.StatusBadGateway, "upstream connect error or disconnect/reset before headers. reset reason: "+reason)
	}
}

// filterBodyReply answers a request whose body a filter's replacement refused
// while the router sent it (filter.ReplyError).
func filterBodyReply(w http.ResponseWriter, r *http.Request, lr *filter.LocalReply) {
	if t := targetFrom(r.Context()); t != nil {
		t.ex.info.Details = lr.Details
	}
	setHeaders(w.Header(), lr.Headers)
	localReply(w, lr.Status, lr.Body)
}

// outcome records Envoy's response flags and details of a reply the proxy
// makes instead of the upstream's, for the access log and header values.
func outcome(r *http.Request, flags, details string) {
	if t := targetFrom(r.Context()); t != nil {
		t.ex.info.ResponseFlags, t.ex.info.Details = flags, details
	}
}

// resetFlag is Envoy's response flag of an upstream failure before the
// response: a connection that could not be made (UF), a protocol error
// (UPE), or a connection that ended (UC).
func resetFlag(reason string) string {
	switch {
	case strings.HasPrefix(reason, "connection failure"), reason == "connection timeout", strings.HasPrefix(reason, "destination refused"):
		return "UF"
	case reason == "protocol error":
		return "UPE"
	}
	return "UC"
}

func resetReason(err error) string {
	var ne net.Error
	var te *upstream.TLSHandshakeError
	var re *upstream.DestinationRefusedError
	switch {
	case errors.As(err, &re):
		// The address and the Service are in the proxy's log, not told to clients.
		return "destination refused (" + re.Reason.Label() + "): the proxy does not connect to it"
	case errors.As(err, &te):
		return "connection failure, transport failure reason: " + te.Error()
	case errors.As(err, &ne) && ne.Timeout():
		return "connection timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection failure"
	case strings.Contains(err.Error(), "malformed"), strings.Contains(err.Error(), "bad status"):
		return "protocol error"
	}
	return "connection termination"
}

// unescapedPath returns the decoded form of an escaped path, or the escaped
// form itself if it does not decode (URL.RawPath then wins anyway).
func unescapedPath(escaped string) string {
	if u, err := url.PathUnescape(escaped); err == nil {
		return u
	}
	return escaped
}
