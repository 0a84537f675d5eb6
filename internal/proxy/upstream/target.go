package upstream

// What the codec's client asks of a request's target (under TargetKey) besides
// its cluster: to take interim responses, and to tell when an exchange must stop.

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
)

// InterimReceiver is a request's target (under TargetKey) that takes the
// upstream's interim (1xx) responses other than 101. The codec's client hands
// them over directly, so that a forwarded request needs no httptrace in its
// context (two allocations a request); Go's transports, which know only
// httptrace, get a hook made for them (withInterimTrace).
type InterimReceiver interface {
	GotInterim(code int, header textproto.MIMEHeader) error
}

// interimReceiverFrom returns the target of the request whose context is ctx
// when it takes interim responses; nil otherwise.
func interimReceiverFrom(ctx context.Context) InterimReceiver {
	r, _ := ctx.Value(TargetKey{}).(InterimReceiver)
	return r
}

// AbortWatcher is a request's target (under TargetKey) that tells the codec's
// client when an exchange must stop, as context.AfterFunc on the request's
// context would, without its four allocations an exchange. WatchAbort has f
// run once when ctx is cancelled, or reports false when it cannot watch ctx
// (the client then uses context.AfterFunc); UnwatchAbort withdraws f and
// reports whether it had not run, as AfterFunc's stop does.
type AbortWatcher interface {
	WatchAbort(ctx context.Context, f func()) bool
	UnwatchAbort() bool
}

// CodecExchanger is a request's target (under TargetKey) told that the
// codec's client, not one of Go's transports, makes an exchange for it, and
// whether it dialled the connection for it. With a pooled connection, the
// client keeps nothing of the request or its context once the response body
// is closed (a pooled connection forgets them with its next exchange), where
// Go's transports may still hold the context in a dial or a loop of theirs,
// and a dial may leave a goroutine of its own (the loser of a dual-stack
// race) still reading the context: only then may the target's owner reuse it
// for another request.
type CodecExchanger interface{ CodecExchange(dialled bool) }

// withInterimTrace returns req for one of Go's transports: with a trace that
// gives its target the interim responses, when it takes them.
func withInterimTrace(req *http.Request) *http.Request {
	ctx := req.Context()
	r := interimReceiverFrom(ctx)
	if r == nil {
		return req
	}
	return req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: r.GotInterim}))
}

// interimTracing is one of Go's transports (an HTTP/2 cluster's) in front of
// which requests get their interim trace.
type interimTracing struct{ rt http.RoundTripper }

func (t interimTracing) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.rt.RoundTrip(withInterimTrace(req))
}
