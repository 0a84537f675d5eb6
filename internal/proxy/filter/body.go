package filter

import (
	"errors"
	"io"
)

// Body is a request body as filters see it before the router forwards the
// request: a filter may read its start (Buffer), which the router then sends
// first, followed by the rest as the client sends it. Nothing is read unless a
// filter asks, so a request whose filters never look at its body costs
// nothing more.
type Body struct {
	src    io.Reader
	length int64
	buf    []byte
	ended  bool  // src returned io.EOF: buf is the whole body
	err    error // sticky read error of src, other than io.EOF
}

// Length is the body's declared length (Content-Length), or -1 when the
// client did not declare it (chunked, or HTTP/2 without content-length).
func (b *Body) Length() int64 { return b.length }

// Buffer reads the body until at least n bytes are buffered or it ends, and
// returns every byte buffered so far (more than n when an earlier call asked
// for more) and whether that is the whole body. To learn whether a body fits
// in max bytes, ask for max+1. A read error (the client went away, or sent a
// malformed body) is returned with what was buffered; it is also what the
// router's reads of the body get after the buffered bytes. A client that
// stalls is cut short at the stream idle timeout: that error wraps
// os.ErrDeadlineExceeded, and the filter should answer 408.
func (b *Body) Buffer(n int) ([]byte, bool, error) {
	for len(b.buf) < n && !b.ended && b.err == nil {
		if cap(b.buf) == len(b.buf) {
			b.buf = append(b.buf, make([]byte, min(max(n-len(b.buf), 512), 32<<10))...)[:len(b.buf)]
		}
		m, err := b.src.Read(b.buf[len(b.buf):cap(b.buf)])
		b.buf = b.buf[:len(b.buf)+m]
		switch {
		case errors.Is(err, io.EOF):
			b.ended = true
		case err != nil:
			b.err = err
		}
	}
	return b.buf, b.ended, b.err
}

// SetBody gives the stream's filters the request body src, of length bytes
// (-1: not declared); it sets Request.Body. The proxy calls it for requests
// that have a body, before the chain runs.
func (s *Stream) SetBody(src io.Reader, length int64) {
	s.body = Body{src: src, length: length}
	s.Request.Body = &s.body
}

// Buffered is what filters read of the body, which the router must send
// before the rest of it; ok is false when no filter read any of it.
func (s *Stream) Buffered() (buf []byte, ok bool) {
	if s.Request.Body == nil || (s.body.buf == nil && !s.body.ended && s.body.err == nil) {
		return nil, false
	}
	return s.body.buf, true
}
