package hcm

import (
	"errors"
	"net/http"
	"time"
)

// errRequestTimeout is the cancellation cause of a request whose body did not
// arrive whole within the connection manager's request_timeout.
var errRequestTimeout = errors.New("request timeout")

// startRequestTimeout bounds how long the request's body may take to arrive
// (HCM request_timeout, Envoy's whole-request timer, which runs from the
// request's arrival, filters included): once it expires before the
// body is complete and before the response began, the request is cancelled
// (408) and the read of the stalled upload is unblocked. The returned function
// disarms it. Only a request with a body arms it: one without is complete when
// it is forwarded.
func (t *upstreamTarget) startRequestTimeout(rw *responseWriter) (stop func()) {
	d := rw.hcm.RequestTimeout
	if d <= 0 {
		return func() {}
	}
	timer := time.AfterFunc(d-time.Since(rw.start), func() {
		if t.done.isComplete() || rw.headerSent.Load() {
			return
		}
		t.cancelWith(errRequestTimeout)
		_ = http.NewResponseController(rw.ResponseWriter).SetReadDeadline(time.Now())
	})
	stop = func() { timer.Stop() }
	t.done.onComplete(waiterFunc(stop))
	return stop
}
