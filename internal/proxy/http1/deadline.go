package http1

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A client that stops reading must not hold its connection, its goroutine
// and its buffers (and, while the handler runs, an upstream connection) for
// as long as it likes. Every write to the client, the handler's and the
// flush after it returned alike, goes through a ConnWriter that bounds it by
// the stream idle timeout, as Envoy's stream_idle_timeout covers the
// downstream side: a write that makes no progress for that long fails, and
// the connection closes.
//
// The bound is the connection's write deadline rather than a goroutine or a
// timer per write. Setting a deadline modifies a runtime timer, so it is not
// set per write: it is set for the timeout and an eighth more, and moved
// only once an eighth of the timeout has passed since it was last set. A
// write that makes no progress therefore fails between the timeout and an
// eighth more after it began; keep-alive requests in quick succession set it
// once.

// maxWriteAtOnce bounds one write to the connection, so that a large write
// refreshes the deadline as its pieces go out: progress is a piece sent.
const maxWriteAtOnce = 64 << 10

// ConnWriter is what a connection's buffered writer writes to. Outside the
// codec it bounds the writes of connections Go's HTTP/2 server serves
// (NewConnWriter), which has no such bound once a handler returns.
type ConnWriter struct {
	conn net.Conn
	// timeout is the current stream's idle timeout, in nanoseconds; 0: writes
	// are not bounded. Stored by the handler, read by whoever writes (a
	// timer's flush of pipelined answers runs on another goroutine).
	timeout atomic.Int64
	// handlerDeadline: the handler set a write deadline itself (the
	// connection manager cutting a stream), which is then left alone until
	// the next request. It is set under mu, which a refresh holds while it
	// sets the deadline, so that a refresh never undoes the handler's.
	handlerDeadline atomic.Bool
	mu              sync.Mutex

	// Written by the goroutine that writes, which the response's lock and
	// the request cycle keep to one at a time.
	armed    bool
	armedAt  time.Time
	armedFor time.Duration
}

// NewConnWriter bounds the writes to conn, by a timeout SetTimeout sets.
func NewConnWriter(conn net.Conn) *ConnWriter { return &ConnWriter{conn: conn} }

// SetTimeout sets how long a write may make no progress before it fails; 0:
// for ever.
func (w *ConnWriter) SetTimeout(d time.Duration) { w.timeout.Store(int64(d)) }

func (w *ConnWriter) Write(p []byte) (int, error) {
	n := 0
	for {
		piece := p[n:]
		if len(piece) > maxWriteAtOnce {
			piece = piece[:maxWriteAtOnce]
		}
		w.refresh()
		m, err := w.conn.Write(piece)
		n += m
		if err != nil || n == len(p) {
			return n, err
		}
	}
}

// refresh sets the write deadline for the next write when it is not set
// for the current timeout or was set an eighth of it ago; it clears it when
// writes are not bounded.
func (w *ConnWriter) refresh() {
	if w.handlerDeadline.Load() {
		return
	}
	t := time.Duration(w.timeout.Load())
	if t <= 0 {
		w.clear()
		return
	}
	now := time.Now()
	if w.armed && w.armedFor == t && now.Sub(w.armedAt) < t/8 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.handlerDeadline.Load() {
		_ = w.conn.SetWriteDeadline(now.Add(t + t/8))
		w.armed, w.armedAt, w.armedFor = true, now, t
	}
}

// clear removes the deadline the writer set, if any.
func (w *ConnWriter) clear() {
	if !w.armed {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.handlerDeadline.Load() {
		_ = w.conn.SetWriteDeadline(time.Time{})
	}
	w.armed = false
}

// SetDeadline sets a write deadline that no refresh of the bound moves
// until the next request: a closing connection's last writes.
func (w *ConnWriter) SetDeadline(t time.Time) error { return w.setByHandler(t) }

// setByHandler sets the write deadline a handler asks for, which holds until
// the next request.
func (w *ConnWriter) setByHandler(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handlerDeadline.Store(true)
	return w.conn.SetWriteDeadline(t)
}

// reset starts a request: its stream idle timeout is the connection's until
// the handler says otherwise, and a deadline a handler set is replaced at the
// next write.
func (w *ConnWriter) reset(timeout time.Duration) {
	w.SetTimeout(timeout)
	if w.handlerDeadline.Load() {
		w.mu.Lock()
		w.handlerDeadline.Store(false)
		w.armed = false
		w.mu.Unlock()
	}
}

// release stops bounding writes, for a hijacked connection: its new owner
// sets its own deadlines.
func (w *ConnWriter) release() {
	w.timeout.Store(0)
	w.clear()
	w.handlerDeadline.Store(true)
}
