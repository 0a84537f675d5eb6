package listener

import "sync"

// writeBatch gathers what Go's HTTP/2 server writes to one connection into
// fewer socket writes. The server flushes its buffer whenever it has no frame
// left to write, and its streams' handlers hand it their frames one at a
// time: unbatched, a response cost about three socket writes (each a system
// call and a wake-up of the client) for its HEADERS and DATA. Here the
// server's write only appends to the batch, which a flusher goroutine sends
// once the writer waits: started by the write (Go runs a goroutine just
// started as soon as its starter blocks, or after the goroutine the writer
// wakes), it takes with it what the server and the handlers it woke wrote
// meanwhile, and ends once nothing waits: an idle connection keeps neither a
// goroutine nor an array.
//
// Bytes leave in the order they were written. A batch is bounded
// (maxWriteBatch): a write that would exceed it, or a large one, sends what
// waits and itself in the writer's goroutine, which then waits for the client
// as it would without a batch. A failed send fails every later write and
// calls failed (which ends the connection, so that a server with nothing more
// to write learns of it through its read).
type writeBatch struct {
	send   func([]byte) (int, error) // the socket's (bounded) write
	failed func(error)

	// wmu is held by whoever writes to the socket, from taking a batch to
	// the end of its write: batches leave in the order they were taken.
	wmu sync.Mutex

	mu      sync.Mutex
	buf     []byte  // what waits to be sent
	arr     *[]byte // buf's array's holder in batchArrays; nil with buf
	err     error   // the first failed send's
	running bool    // a flusher goroutine runs: a round of it will take buf
	closed  bool
}

// maxWriteBatch bounds what a connection's server may have written ahead of
// its socket. A write of more than maxBatchedWrite (a large DATA frame, which
// Go's server writes from a goroutine of its own) goes to the socket without a
// copy into the batch, after what waits: it saves no system call worth the
// copy. An array that grew past keptBatchCap is not kept for other batches.
const (
	maxWriteBatch   = 64 << 10
	maxBatchedWrite = 8 << 10
	keptBatchCap    = 16 << 10
)

// batchArrays are the arrays of the batches of all connections: a connection
// holds one only while bytes wait (many HTTP/2 connections are idle most of
// their lives, as the server's own buffers are pooled for).
var batchArrays = sync.Pool{New: func() any {
	b := make([]byte, 0, keptBatchCap)
	return &b
}}

func newWriteBatch(send func([]byte) (int, error), failed func(error)) *writeBatch {
	return &writeBatch{send: send, failed: failed}
}

// Write appends p to the batch, or sends what waits and p when p is large,
// when the batch would grow past maxWriteBatch, or once the batch is closed.
func (b *writeBatch) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	if b.closed || len(p) > maxBatchedWrite || len(b.buf)+len(p) > maxWriteBatch {
		b.mu.Unlock()
		return b.writeThrough(p)
	}
	if b.arr == nil {
		b.arr = batchArrays.Get().(*[]byte)
		b.buf = (*b.arr)[:0]
	}
	b.buf = append(b.buf, p...)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	return len(p), nil
}

// writeThrough sends what waits, then p, in the caller's goroutine.
func (b *writeBatch) writeThrough(p []byte) (int, error) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	if err := b.sendWaiting(); err != nil {
		return 0, err
	}
	return b.sendNow(p)
}

// run is the flusher: it sends what waits until a round finds that nothing
// was written during its send.
func (b *writeBatch) run() {
	for {
		_ = b.Flush()
		b.mu.Lock()
		if len(b.buf) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// Flush sends what waits now, in the caller's goroutine.
func (b *writeBatch) Flush() error {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	return b.sendWaiting()
}

// TryFlush sends what waits now unless a send is underway; it reports
// whether it did.
func (b *writeBatch) TryFlush() bool {
	if !b.wmu.TryLock() {
		return false
	}
	defer b.wmu.Unlock()
	_ = b.sendWaiting()
	return true
}

// sendWaiting sends the batch; the caller holds wmu.
func (b *writeBatch) sendWaiting() error {
	b.mu.Lock()
	p, arr, err := b.buf, b.arr, b.err
	b.buf, b.arr = nil, nil
	b.mu.Unlock()
	if err == nil && len(p) > 0 {
		_, err = b.sendNow(p)
	}
	if arr != nil && cap(p) <= keptBatchCap {
		*arr = p[:0]
		batchArrays.Put(arr)
	}
	return err
}

// sendNow writes p to the socket; the caller holds wmu.
func (b *writeBatch) sendNow(p []byte) (int, error) {
	n, err := b.send(p)
	if err != nil {
		b.mu.Lock()
		first := b.err == nil
		if first {
			b.err = err
		}
		b.mu.Unlock()
		if first {
			b.failed(err)
		}
	}
	return n, err
}

// Close sends what waits; later writes go straight to the socket.
func (b *writeBatch) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.Flush()
}
