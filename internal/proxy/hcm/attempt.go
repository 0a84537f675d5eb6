package hcm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portico-dev/portico/internal/proxy/upstream"
)

var (
	// errPerTryTimeout is the cancellation cause of an attempt whose
	// per_try_timeout expired; with no retry left the client gets 504.
	errPerTryTimeout = errors.New("per-try timeout")
	// errNoHealthyUpstream ends a request whose retry finds no endpoint.
	errNoHealthyUpstream = errors.New("no healthy upstream")
)

// attemptTransport makes the attempts of a forwarded request. ReverseProxy
// calls it once per request; it returns the response (or error) of the
// last attempt, and the responses of retried attempts never reach the client.
type attemptTransport struct {
	base http.RoundTripper
}

func (at attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t := targetFrom(req.Context())
	if t == nil {
		return at.base.RoundTrip(req)
	}
	if tr := t.cluster.Transport; tr != nil {
		return t.roundTrip(tr, req) // upstream TLS, HTTP/2 or idle_timeout
	}
	return t.roundTrip(at.base, req)
}

// roundTrip runs attempts until one must be delivered: it succeeded, is
// not retriable, no retry is left, the body cannot be replayed, or the
// circuit breaker refuses another retry. The cluster was chosen once for
// the request; every retry picks an endpoint again, after its back-off.
func (t *upstreamTarget) roundTrip(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	rp := t.retry
	replay := t.replay
	if replay == nil && rp.NumRetries > 0 && rp.On != 0 && req.Body != nil && req.Body != http.NoBody {
		replay = newReplayBuffer(req.Body)
	}
	endpoint := int(t.endpointIdx)
	// n counts the attempts; attempt n > 1 is retry n-1.
	for n := 1; ; n++ {
		if err := t.cluster.Admit(req.Context(), endpoint); err != nil {
			if n > 1 {
				t.cluster.ReleaseRetry()
			}
			return nil, err // an overflow is not retried, as in Envoy
		}
		a, out := t.newAttempt(req, endpoint, replay)
		res, err := base.RoundTrip(out)
		if n > 1 {
			t.cluster.ReleaseRetry() // the retry has its outcome
		}
		o := a.outcome(req.Context(), err)
		switch o {
		case upstream.OutcomeConnectFailure:
			t.cluster.Stats.ConnectFailed()
		case upstream.OutcomePerTryTimeout:
			t.cluster.Stats.PerTryTimedOut()
		}
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		if od := t.cluster.Outlier; od != nil {
			// Only the route timeout is the upstream's doing (Envoy records a
			// timeout); a client that left or an idle stream is not.
			routeTimedOut := o == upstream.OutcomeAborted && errors.Is(context.Cause(req.Context()), errRouteTimeout)
			od.Observe(t.cluster.OutlierHosts[endpoint], o, status, routeTimedOut)
		}
		if n > rp.NumRetries || !rp.Retriable(o, status) && !rp.RetriableGRPC(res) ||
			(replay != nil && !replay.replayable()) || !t.cluster.AcquireRetry() {
			return a.deliver(res, err, o)
		}
		a.discard(res)
		t.cluster.Stats.Retried()
		if !sleepCtx(req.Context(), rp.BackOff(n)) {
			t.cluster.ReleaseRetry()
			return nil, context.Cause(req.Context())
		}
		next, ok := t.cluster.Pick(t.pick)
		if !ok {
			t.cluster.ReleaseRetry()
			return nil, errNoHealthyUpstream
		}
		endpoint = next
	}
}

// attempt is one try of a request at one endpoint.
type attempt struct {
	t        *upstreamTarget
	endpoint int
	ctx      context.Context         // the request's, or the attempt's own (per-try timeout)
	cancel   context.CancelCauseFunc // nil: the attempt runs in the request's context
	perTry   *routeTimer             // nil without per_try_timeout
	endOnce  sync.Once

	// final and bodyClosed decide when a replayed body counts as sent (see bodyDone).
	final      atomic.Bool
	bodyClosed atomic.Bool
	// body is the delivered response's body, in the attempt's allocation.
	body attemptBody
}

// newAttempt prepares the outgoing request of an attempt at endpoint. Only an
// attempt with a per-try timeout has a context of its own, for the timeout to
// cancel; others run in the request's, which already ends with the request,
// and the first of them sends the request itself rather than a copy of it.
func (t *upstreamTarget) newAttempt(req *http.Request, endpoint int, replay *replayBuffer) (*attempt, *http.Request) {
	a := &t.first
	if t.attempts > 0 {
		a = new(attempt)
	}
	a.t, a.endpoint, a.ctx = t, endpoint, req.Context()
	host := t.cluster.Endpoints[endpoint]
	out := req
	if d := t.retry.PerTryTimeout; d > 0 {
		ctx, cancel := context.WithCancelCause(req.Context())
		a.ctx, a.cancel = ctx, cancel
		// As in Envoy, it starts once the downstream request is complete AND the
		// attempt has its connection: connecting is bounded by connect_timeout, and a
		// connection that cannot be made is a connect failure, not a per-try timeout.
		a.perTry = &routeTimer{timeout: d, cancel: a, cause: errPerTryTimeout}
		var pending atomic.Int32
		pending.Store(2)
		armWhenBoth := func() {
			if pending.Add(-1) == 0 {
				a.perTry.arm()
			}
		}
		t.done.onComplete(waiterFunc(armWhenBoth))
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { armWhenBoth() }})
		out = req.WithContext(ctx)
	}
	if out == req && (replay != nil || req.URL.Host != host) {
		out = new(http.Request)
		*out = *req
	}
	if out != req {
		u := *req.URL
		u.Host = host
		out.URL = &u
		if replay != nil {
			out.Body = replay.reader(a.bodyDone)
		}
	}
	t.attempts++
	t.ex.attempts = int(t.attempts)
	t.ex.info.UpstreamHost = host
	t.cluster.Active[endpoint].Add(1)
	t.cluster.State.Served.Store(true)
	return a, out
}

// cancelWith ends the attempt's own context (its per-try timeout).
func (a *attempt) cancelWith(cause error) { a.cancel(cause) }

// bodyDone is called when the attempt's transport closes its (replayed)
// request body. For the delivered attempt that ends the upload, which
// starts the route timeout as closing the client's body would.
func (a *attempt) bodyDone() {
	a.bodyClosed.Store(true)
	if a.final.Load() {
		a.t.done.complete()
	}
}

func (a *attempt) outcome(reqCtx context.Context, err error) upstream.Outcome {
	switch {
	case err == nil:
		return upstream.OutcomeResponse
	case reqCtx.Err() != nil:
		return upstream.OutcomeAborted
	case errors.Is(context.Cause(a.ctx), errPerTryTimeout):
		return upstream.OutcomePerTryTimeout
	case isDialError(err):
		return upstream.OutcomeConnectFailure
	}
	return upstream.OutcomeReset
}

// isDialError reports whether err is a failure to connect.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// deliver hands the attempt's result to ReverseProxy. A response keeps the
// attempt running until its body is closed.
func (a *attempt) deliver(res *http.Response, err error, o upstream.Outcome) (*http.Response, error) {
	a.final.Store(true)
	if a.bodyClosed.Load() {
		a.t.done.complete()
	}
	if err != nil {
		a.end()
		if o == upstream.OutcomePerTryTimeout {
			return nil, fmt.Errorf("%w: %w", errPerTryTimeout, err)
		}
		return nil, err
	}
	// Once the response is on its way to the client, only the route timeout bounds
	// it: Envoy ignores a per-try timeout after the downstream response started.
	a.perTry.stop()
	// Response headers on their way to the client are stream activity;
	// those of retried attempts are not (Envoy never encodes them).
	a.t.idle.touch()
	if res.StatusCode == http.StatusSwitchingProtocols && !upgradeAsked(res) {
		// ReverseProxy fails such a response without closing its body; close it here
		// so that the attempt ends (its active-request count, timers, context).
		_ = res.Body.Close()
		a.end()
		return nil, errors.New("upstream switched protocols although the request asked for no such upgrade")
	}
	if rwc, ok := res.Body.(io.ReadWriteCloser); ok && res.StatusCode == http.StatusSwitchingProtocols {
		// ReverseProxy needs a writable body to splice an upgraded connection.
		res.Body = &upgradedBody{attemptBody{ReadCloser: rwc, a: a}, rwc}
		return res, nil
	}
	a.body = attemptBody{ReadCloser: res.Body, a: a}
	res.Body = &a.body
	return res, nil
}

// upgradeAsked reports whether a 101 response answers the upgrade its request asked for.
func upgradeAsked(res *http.Response) bool {
	if res.Request == nil {
		return false
	}
	asked := headerValue(res.Request.Header, "Upgrade")
	return asked != "" && strings.EqualFold(asked, headerValue(res.Header, "Upgrade"))
}

// discard drops the response of an attempt that is retried.
func (a *attempt) discard(res *http.Response) {
	if res != nil {
		// Closing an unread body closes its connection: retried
		// responses are rare enough not to drain them for reuse.
		_ = res.Body.Close()
	}
	a.end()
}

// end releases what the attempt holds: its place among the endpoint's
// active requests and the circuit breakers', its per-try timer and its context.
func (a *attempt) end() {
	a.endOnce.Do(func() {
		a.t.cluster.Active[a.endpoint].Add(-1)
		a.t.cluster.Leave()
		a.perTry.stop()
		if a.cancel != nil {
			a.cancel(nil)
		}
	})
}

// attemptBody is the response body of the delivered attempt: bytes received
// are stream activity, and its end ends the attempt.
type attemptBody struct {
	io.ReadCloser
	a *attempt
}

func (b *attemptBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.a.t.idle.touch()
	}
	if err != nil {
		b.a.end()
	}
	return n, err
}

func (b *attemptBody) Close() error {
	err := b.ReadCloser.Close()
	b.a.end()
	return err
}

// upgradedBody is the connection of an upgraded (101) response; data in
// either direction is stream activity.
type upgradedBody struct {
	attemptBody
	w io.Writer
}

func (b *upgradedBody) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	if n > 0 {
		b.a.t.idle.touch()
	}
	return n, err
}

// sleepCtx sleeps for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
