package hcm

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portico-dev/portico/internal/proxy/router"
)

// defaultStreamIdleTimeout is Envoy's HCM stream_idle_timeout when unset.
const defaultStreamIdleTimeout = 5 * time.Minute

// errStreamIdleTimeout is the cancellation cause of a request whose stream
// idle timeout fired: 408 before the response head was sent, a reset after.
var errStreamIdleTimeout = errors.New("stream idle timeout")

// idleTimeoutFor returns the idle timeout of a forwarded request: the
// route's idle_timeout when set (0 disables it), else the HCM's
// stream_idle_timeout (0 disables it too).
func idleTimeoutFor(fa *router.ForwardAction, hcm *Spec) time.Duration {
	if fa.HasIdleTimeout {
		return fa.IdleTimeout
	}
	return hcm.StreamIdleTimeout
}

// filterIdleTimeout is the stream idle timeout while filters run: the
// route's when it forwards, else the HCM's.
func filterIdleTimeout(rt *router.Route, hcm *Spec) time.Duration {
	if rt != nil && rt.Forward != nil {
		return idleTimeoutFor(rt.Forward, hcm)
	}
	return hcm.StreamIdleTimeout
}

// filterBody is the request body as filters read it. A filter reading it
// waits on the client: the stream idle timeout bounds that wait, as it bounds
// the router's reads (Envoy's timer starts with the stream). The timer starts
// with the first read, so a body no filter reads costs no timer.
type filterBody struct {
	src     io.Reader
	timeout time.Duration
	rw      *responseWriter
	idle    *idleTimer
	started bool
}

func (b *filterBody) Read(p []byte) (int, error) {
	if !b.started {
		b.started = true
		b.idle = startIdleTimer(b.timeout, b)
	}
	n, err := b.src.Read(p)
	if n > 0 {
		b.idle.touch()
	}
	return n, err
}

// stop disarms the timer once the filters are done with the body.
func (b *filterBody) stop() { b.idle.stop() }

// idleExpired unblocks a filter's read that waits on a stalled client.
func (b *filterBody) idleExpired() {
	_ = http.NewResponseController(b.rw.ResponseWriter).SetReadDeadline(time.Now())
}

// idleExpirer is told that its stream has been idle for its timeout. An
// interface rather than a func: what is told is the stream's own struct, and
// a closure over it would cost an allocation per request.
type idleExpirer interface{ idleExpired() }

// idleTimer fires when a stream has seen no activity for its timeout. Activity
// is recorded with touch, which only stores a timestamp: the timer re-arms
// itself lazily for the remaining time instead of being reset per read.
type idleTimer struct {
	timeout time.Duration
	fire    idleExpirer
	start   time.Time
	last    atomic.Int64 // time.Since(start) of the last activity, in ns

	mu      sync.Mutex
	timer   *pooledTimer
	stopped bool
	// disturbed: its timer went off, and a call may still reach it.
	disturbed bool
}

// startIdleTimer returns a running idle timer, or nil (a valid no-op timer)
// when the timeout is disabled.
func startIdleTimer(timeout time.Duration, fire idleExpirer) *idleTimer {
	if timeout <= 0 {
		return nil
	}
	return new(idleTimer).run(timeout, fire)
}

// run starts it, an idle timer never started before, and returns it, or nil
// when the timeout is disabled (startIdleTimer for a timer of its own
// allocation).
func (it *idleTimer) run(timeout time.Duration, fire idleExpirer) *idleTimer {
	if timeout <= 0 {
		return nil
	}
	it.timeout, it.fire, it.start = timeout, fire, time.Now()
	it.mu.Lock()
	it.timer = startTimer(timeout, it)
	it.mu.Unlock()
	return it
}

// touch records activity on the stream.
func (it *idleTimer) touch() {
	if it != nil {
		it.last.Store(int64(time.Since(it.start)))
	}
}

func (it *idleTimer) expire() { it.check() }

func (it *idleTimer) check() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.stopped {
		return
	}
	idle := time.Since(it.start) - time.Duration(it.last.Load())
	if idle < it.timeout {
		it.timer.reset(it.timeout - idle)
		return
	}
	it.stopped = true
	it.fire.idleExpired()
}

// stop disarms the timer; once it returns, fire is not running and will not run.
// Only the first call releases the pooled timer (an internal redirect stops
// the timer in run and again in forward): by a second, the pool may have
// handed it to another request.
func (it *idleTimer) stop() {
	if it == nil {
		return
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	it.stopped = true
	if it.timer != nil {
		it.disturbed = !it.timer.release()
		it.timer = nil
	}
}
