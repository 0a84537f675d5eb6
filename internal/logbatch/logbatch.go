// Package logbatch provides a log sink that can gather the lines written in a
// burst into one write. The proxy's access log writes a line per request; one
// write(2) per line costs a syscall per request, so its writer holds the sink
// while it has more lines queued and releases it when the queue is empty.
package logbatch

import (
	"io"
	"sync"
)

// MaxBatch is how many bytes a held Writer gathers before it writes them
// anyway, as nginx's access_log buffer=64k does: a burst's lines still reach
// the sink in order while it lasts, a batch at a time.
const MaxBatch = 64 << 10

// Writer passes writes through to an underlying writer, except between Hold
// and Release, when it gathers them (from any goroutine, in the order they
// are written) and writes them at Release or when MaxBatch bytes are
// waiting. Holding never delays a line beyond the holder's Release, so a
// holder must release as soon as it has nothing more to write.
type Writer struct {
	mu    sync.Mutex
	w     io.Writer
	holds int
	buf   []byte
}

// New returns a Writer writing to w.
func New(w io.Writer) *Writer {
	return &Writer{w: w}
}

// Write writes p, or gathers it while the Writer is held. A batch's write
// error is lost, as slog.Logger drops its handler's.
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holds == 0 {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= MaxBatch {
		b.flushLocked()
	}
	return len(p), nil
}

// Immediate returns a writer to the same destination that never waits for a
// Hold: what is written through it goes out at once, ahead of what a Hold is
// gathering. The process's own log writes through it, so that a burst of
// access log lines never delays a line saying what went wrong, nor takes it
// down with the batch in a crash.
func (b *Writer) Immediate() io.Writer { return immediate{b} }

type immediate struct{ b *Writer }

func (w immediate) Write(p []byte) (int, error) {
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	return w.b.w.Write(p)
}

// Hold starts gathering writes. Holds nest: writes go out when every Hold
// has been released.
func (b *Writer) Hold() {
	b.mu.Lock()
	b.holds++
	b.mu.Unlock()
}

// Release ends a Hold, writing what was gathered once no Hold is left.
func (b *Writer) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holds == 0 {
		panic("logbatch: Release without Hold")
	}
	b.holds--
	if b.holds == 0 {
		b.flushLocked()
	}
}

func (b *Writer) flushLocked() {
	if len(b.buf) == 0 {
		return
	}
	_, _ = b.w.Write(b.buf)
	// A burst larger than usual leaves a large buffer behind; keep only
	// what a batch needs.
	if cap(b.buf) > 2*MaxBatch {
		b.buf = nil
	} else {
		b.buf = b.buf[:0]
	}
}
