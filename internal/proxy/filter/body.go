package filter

import (
	"bytes"
	"errors"
	"io"
)

// Body is a request body as filters see it before the router forwards the
// request: a filter may read its start (Buffer), which the router then sends
// first, followed by the rest as the client sends it, or replace it by a
// transformation of itself (Replace), which the router then sends instead.
// Nothing is read unless a filter asks, so a request whose filters never look
// at its body costs nothing more.
type Body struct {
	src    io.Reader // the client's body, or a filter's replacement of it
	length int64
	buf    []byte
	ended  bool  // src returned io.EOF: buf is the whole body
	err    error // sticky read error of src, other than io.EOF
	// replaced: a filter replaced the body; what the router sends is then
	// buf and the rest of src whatever was read.
	replaced bool
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

// Replace makes the body, as the router sends it and as later filters'
// Buffer reads it, what replace returns: it is given the body as it stands
// (what filters buffered, then the rest from the client) and transforms it as
// it streams, such as gRPC-Web's base64 decoding. The length becomes
// undeclared (-1). An error the replacement returns fails the upstream request;
// a *ReplyError then answers the client, if the response has not started.
func (b *Body) Replace(replace func(io.Reader) io.Reader) {
	cur := b.src
	if len(b.buf) > 0 || b.err != nil {
		cur = &pending{buf: b.buf, err: b.err, src: b.src}
	}
	*b = Body{src: replace(cur), length: -1, replaced: true}
}

// pending is a body's bytes already read (and its read error, if reading
// failed), then the rest of it.
type pending struct {
	buf []byte
	err error
	src io.Reader
}

func (p *pending) Read(b []byte) (int, error) {
	switch {
	case len(p.buf) > 0:
		n := copy(b, p.buf)
		p.buf = p.buf[n:]
		return n, nil
	case p.err != nil:
		return 0, p.err
	}
	return p.src.Read(b)
}

// ReplyError is the error a body replacement returns to refuse the body
// (gRPC-Web's malformed base64): the client gets Reply instead of an upstream's
// answer when the response has not started.
type ReplyError struct {
	Reply LocalReply
}

func (e *ReplyError) Error() string {
	if e.Reply.Details != "" {
		return "request body refused: " + e.Reply.Details
	}
	return "request body refused: " + e.Reply.Body
}

// SetBody gives the stream's filters the request body src, of length bytes
// (-1: not declared); it sets Request.Body. The proxy calls it for requests
// that have a body, before the chain runs. src is read by filters only:
// ForwardBody gives the router's source of what they left.
func (s *Stream) SetBody(src io.Reader, length int64) {
	s.client.r = src
	s.body = Body{src: &s.client, length: length}
	s.Request.Body = &s.body
}

// switchable is the client's body as the stream reads it: the proxy's reader
// for filters, then the router's (ForwardBody), which a filter's replacement
// goes on reading from.
type switchable struct{ r io.Reader }

func (s *switchable) Read(p []byte) (int, error) { return s.r.Read(p) }

// ForwardBody is the body the router sends, given rest: the client's body
// from where filters stopped reading it. changed is false when the filters
// neither read nor replaced the body: the router then sends rest as it is.
// length is the body's declared length, -1 once a filter replaced it.
func (s *Stream) ForwardBody(rest io.Reader) (body io.Reader, length int64, changed bool) {
	b := s.Request.Body
	if b == nil {
		return nil, 0, false
	}
	s.client.r = rest
	if !b.replaced {
		if buf, ok := s.Buffered(); ok {
			return io.MultiReader(bytes.NewReader(buf), rest), b.length, true
		}
		return nil, b.length, false
	}
	if len(b.buf) > 0 || b.err != nil {
		return &pending{buf: b.buf, err: b.err, src: b.src}, -1, true
	}
	return b.src, -1, true
}

// Buffered is what filters read of the body, which the router must send
// before the rest of it; ok is false when no filter read any of it.
func (s *Stream) Buffered() (buf []byte, ok bool) {
	if s.Request.Body == nil || (s.body.buf == nil && !s.body.ended && s.body.err == nil) {
		return nil, false
	}
	return s.body.buf, true
}
