package hcm

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/portico-dev/portico/internal/proxy/http1"
)

// maxReplayBytes is how much of a request body is kept for retries: Envoy's
// default buffer limit (1 MiB). A longer body is streamed and not retried.
const maxReplayBytes = 1 << 20

// completion tells the route and per-try timeouts when the downstream
// request is complete (its body read to the end): as in Envoy, they start then.
type completion struct {
	mu      sync.Mutex
	done    bool
	waiters []waiter
	inline  [2]waiter // waiters' first array: a request has one or two
}

// waiter is what runs when a request is complete: an interface rather than a
// func, so that a timer waits without a closure of its own.
type waiter interface{ completed() }

// waiterFunc is a func that waits.
type waiterFunc func()

func (f waiterFunc) completed() { f() }

// complete marks the request complete and runs the waiters, once.
func (c *completion) complete() {
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		return
	}
	c.done = true
	waiters := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	for _, w := range waiters {
		w.completed()
	}
}

// onComplete runs f when the request is complete, at once if it already is.
func (c *completion) onComplete(f waiter) {
	c.mu.Lock()
	if !c.done {
		if c.waiters == nil {
			c.waiters = c.inline[:0]
		}
		c.waiters = append(c.waiters, f)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	f.completed()
}

func (c *completion) isComplete() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// requestBody wraps the downstream request body: reads count as stream
// activity, and the end of the body (EOF, its declared length, or the body
// being closed: the upload is over either way) completes the request.
// downstreamBodyError is a request body the client framed wrongly (the
// HTTP/1.1 codec refused its chunking): the client gets the codec's status
// (400) and the connection closes, as Envoy answers a codec error, rather than
// a 502 that would blame the upstream.
type downstreamBodyError struct{ codec *http1.Error }

func (e *downstreamBodyError) Error() string { return e.codec.Error() }
func (e *downstreamBodyError) Unwrap() error { return e.codec }

type requestBody struct {
	io.ReadCloser
	remaining int64 // bytes left of a declared Content-Length; -1 if unknown
	idle      *idleTimer
	done      *completion
	// trailer is the downstream request's trailer map, which net/http fills in when
	// the body ends; hcm holds the limits it must keep, as headers do.
	trailer http.Header
	hcm     *Spec
}

func (b *requestBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.idle.touch()
	}
	if b.remaining > 0 {
		b.remaining -= int64(n)
		if b.remaining <= 0 {
			b.done.complete()
		}
	}
	var malformed *http1.Error
	if err != nil && errors.As(err, &malformed) {
		return n, &downstreamBodyError{malformed}
	}
	if err != nil && err != io.EOF && strings.Contains(err.Error(), "suspiciously long trailer") {
		// net/http's own cap on HTTP/1.1 trailers (about 4 KiB; its error is not
		// exported): the same refusal as trailers beyond the configured limits.
		return n, errRequestTrailersTooLarge
	}
	if err == io.EOF {
		b.done.complete()
		if len(b.trailer) > 0 && fieldsExceed(b.hcm, b.trailer, 0, 0) != "" {
			// Never forwarded: the upstream request fails and the client gets 431.
			clear(b.trailer)
			return n, errRequestTrailersTooLarge
		}
	}
	return n, err
}

// errRequestTrailersTooLarge ends a request whose trailers exceed the header limits.
var errRequestTrailersTooLarge = errors.New("request trailers exceed the request header limits")

func (b *requestBody) Close() error {
	b.done.complete()
	return b.ReadCloser.Close()
}

// errAttemptSuperseded fails the body reads of an attempt that was given up
// for a retry, should its transport still be sending.
var errAttemptSuperseded = errors.New("request attempt superseded by a retry")

// errReplayLost fails an attempt whose body can no longer be replayed.
var errReplayLost = errors.New("request body exceeded the retry buffer")

// replayBuffer lets every attempt of a request send the same body. The body
// is read from the client once, as attempts need it, and kept (up to
// maxReplayBytes) for the next attempt. Only the latest attempt may read:
// a retried attempt's transport can still be writing in the background.
type replayBuffer struct {
	src   io.Reader
	srcMu sync.Mutex // serialises reads of src, which may block on the client

	mu       sync.Mutex // guards the fields below
	buf      []byte
	overflow bool  // more than maxReplayBytes were read: no more attempts
	lost     bool  // bytes the current attempt needs were dropped at overflow
	srcErr   error // sticky error (io.EOF at the end) of src
	current  *replayReader
}

// newReplayBuffer keeps src for replays until more than maxReplayBytes have been read:
// as in Envoy, a large body rules out retries only once it has actually been sent (a
// connection refused before the first byte is retried whatever the body's length).
func newReplayBuffer(src io.Reader) *replayBuffer {
	return &replayBuffer{src: src}
}

// replayable reports whether another attempt can be given the whole body.
func (b *replayBuffer) replayable() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.overflow
}

// whole reads what is left of the body into the buffer, stopping one byte
// past maxReplayBytes, and reports whether the buffer holds the whole body:
// an internal redirect's target is sent it only then. Reading the rest does
// not wait long in practice: a body this small has arrived with the request.
func (b *replayBuffer) whole() bool {
	b.srcMu.Lock()
	defer b.srcMu.Unlock()
	var chunk []byte
	for {
		b.mu.Lock()
		room := maxReplayBytes + 1 - len(b.buf)
		done := b.overflow || b.lost || b.srcErr != nil || room <= 0
		b.mu.Unlock()
		if done {
			break
		}
		if chunk == nil {
			chunk = make([]byte, 32<<10)
		}
		n, err := b.src.Read(chunk[:min(room, len(chunk))])
		b.mu.Lock()
		b.buf = append(b.buf, chunk[:n]...)
		if err != nil {
			b.srcErr = err
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.overflow && !b.lost && b.srcErr == io.EOF && len(b.buf) <= maxReplayBytes
}

// size is the length of the body kept.
func (b *replayBuffer) size() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(len(b.buf))
}

// reader returns the body of a new attempt, superseding the previous one.
func (b *replayBuffer) reader(onClose func()) *replayReader {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := &replayReader{b: b, onClose: onClose}
	b.current = r
	return r
}

// replayReader is one attempt's request body.
type replayReader struct {
	b       *replayBuffer
	off     int
	onClose func()
	once    sync.Once
}

func (r *replayReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if n, err, done := r.fromBuffer(p); done {
		return n, err
	}
	b := r.b
	b.srcMu.Lock()
	defer b.srcMu.Unlock()
	// Another attempt may have read further while this one waited.
	if n, err, done := r.fromBuffer(p); done {
		return n, err
	}
	n, err := b.src.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.overflow {
		if len(b.buf)+n > maxReplayBytes {
			b.overflow, b.buf = true, nil
			// The current attempt streams on past the limit; but if a
			// superseded attempt read these bytes, the current one can
			// no longer get them.
			b.lost = r != b.current
		} else {
			b.buf = append(b.buf, p[:n]...)
			r.off = len(b.buf)
		}
	}
	if err != nil {
		b.srcErr = err
	}
	return n, err
}

// fromBuffer serves a read from what earlier reads kept; done is false when
// the read must go to the source.
func (r *replayReader) fromBuffer(p []byte) (n int, err error, done bool) {
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.current != r:
		return 0, errAttemptSuperseded, true
	case b.lost:
		return 0, errReplayLost, true
	case r.off < len(b.buf):
		n = copy(p, b.buf[r.off:])
		r.off += n
		return n, nil, true
	case b.srcErr != nil:
		return 0, b.srcErr, true
	}
	return 0, nil, false
}

// Close is called by the attempt's transport; the client's body stays open
// for the next attempt.
func (r *replayReader) Close() error {
	r.once.Do(func() {
		if r.onClose != nil {
			r.onClose()
		}
	})
	return nil
}
