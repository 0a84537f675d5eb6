package hcm

import (
	"context"
	"sync"
)

// canceller ends a request's (or an attempt's) context with a cause.
type canceller interface{ cancelWith(cause error) }

// abortWatch is how a forwarded request tells the codec's upstream client
// that its exchange must stop (upstream.AbortWatcher): every cancellation of
// the request's context goes through cancelWith, and the HTTP/1.1 codec tells
// of a client gone away (clientGone), so the client needs no
// context.AfterFunc per exchange.
type abortWatch struct {
	mu      sync.Mutex
	f       func() // the exchange's unblock; nil: none watched
	aborted bool
}

// cancelWith cancels the request's context and stops its upstream exchange.
func (t *upstreamTarget) cancelWith(cause error) {
	t.cancel(cause)
	t.abortExchange()
}

func (t *upstreamTarget) abortExchange() {
	t.aborts.mu.Lock()
	f := t.aborts.f
	t.aborts.f, t.aborts.aborted = nil, true
	t.aborts.mu.Unlock()
	if f != nil {
		f()
	}
}

// WatchAbort watches the request's own context only (an attempt with a
// per-try timeout has one of its own), and only when every way it ends comes
// through cancelWith or clientGone (watching).
func (t *upstreamTarget) WatchAbort(ctx context.Context, f func()) bool {
	if ctx != context.Context(t) || !t.watching {
		return false
	}
	t.aborts.mu.Lock()
	defer t.aborts.mu.Unlock()
	if t.aborts.aborted || ctx.Err() != nil {
		return false // AfterFunc, on a context done, runs f at once
	}
	t.aborts.f = f
	return true
}

func (t *upstreamTarget) UnwatchAbort() bool {
	t.aborts.mu.Lock()
	defer t.aborts.mu.Unlock()
	watched := t.aborts.f != nil
	t.aborts.f = nil
	return watched
}

// clientGoneNotifier is a response writer whose codec tells, besides
// cancelling the request's context, when the client goes away (the HTTP/1.1
// codec's).
type clientGoneNotifier interface {
	NotifyClientGone(l interface{ ClientGone() })
}

// ClientGone stops the upstream exchange of a request whose client left.
func (t *upstreamTarget) ClientGone() { t.abortExchange() }

// watchClientGone has the codec tell t when the client goes away, where it
// can: the request's context is then only ever cancelled through t, which can
// watch its exchanges. unwatchClientGone ends that.
func (t *upstreamTarget) watchClientGone(rw *responseWriter) {
	if n, ok := rw.ResponseWriter.(clientGoneNotifier); ok {
		n.NotifyClientGone(t)
		t.notifier, t.watching = n, true
	}
}

func (t *upstreamTarget) unwatchClientGone() {
	if t.notifier != nil {
		t.notifier.NotifyClientGone(nil)
	}
}
