package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strconv"
)

// rawProxy is the prototype of a codec of our own: HTTP/1.1 on raw connections, one
// goroutine per client connection and none per request, a buffered reader and writer
// per connection, the strict head parser of rawhead.go into a head reused from request
// to request, Content-Length and chunked bodies copied through as they arrive, one
// pooled upstream connection per exchange. It measures what such a codec costs and
// what it takes to get framing right; it has no timeouts, upgrades, trailers beyond
// passing them on, or 100-continue handling: not a proxy to ship.
type rawProxy struct {
	backend string
	bufs    buffers // for bodies larger than a connection's buffers

	pool idlePool
}

// rawConn is the state of one client connection.
type rawConn struct {
	bufs *buffers
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	req  head
	xff  []byte
	// chunk holds chunk-size lines and trailer fields, reused like req.
	chunk head
}

func (p *rawProxy) serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go p.serveConn(c)
	}
}

func (p *rawProxy) serveConn(c net.Conn) {
	defer c.Close()
	rc := &rawConn{bufs: &p.bufs, conn: c, r: bufio.NewReaderSize(c, 4096), w: bufio.NewWriterSize(c, 4096)}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		rc.xff = []byte(a.IP.String())
	}
	for {
		if err := rc.req.readRequest(rc.r); err != nil {
			rc.refuse(err)
			return
		}
		keep, err := p.forward(rc)
		if err != nil {
			rc.refuse(err)
			return
		}
		if !keep {
			rc.w.Flush()
			return
		}
		// Pipelined requests already read are answered before the writes go out.
		if rc.r.Buffered() == 0 {
			if rc.w.Flush() != nil {
				return
			}
		}
	}
}

// refuse answers a message the codec will not forward, then the connection closes.
// After a read error (the client went away) there is no one to answer.
func (rc *rawConn) refuse(err error) {
	status, reason := 502, "upstream failed"
	var ce *codecError
	switch {
	case errors.As(err, &ce):
		status, reason = ce.status, ce.reason
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return
	}
	w := rc.w
	w.WriteString("HTTP/1.1 ")
	w.WriteString(strconv.Itoa(status))
	w.WriteString(" \r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ")
	w.WriteString(strconv.Itoa(len(reason) + 1))
	w.WriteString("\r\n\r\n")
	w.WriteString(reason)
	w.WriteString("\n")
	w.Flush()
}

var (
	errUpgrade     = &codecError{501, "the raw prototype does not forward upgrades"}
	errBadUpstream = &codecError{502, "the upstream's response could not be read"}
)

// forward sends the request in rc.req upstream and its response back. keep says
// whether the client connection can carry another request.
func (p *rawProxy) forward(rc *rawConn) (keep bool, err error) {
	if rc.req.upgrade {
		return false, errUpgrade
	}
	up, err := p.exchange(rc)
	if err != nil {
		return false, err
	}
	respClose, err := rc.copyResponse(up)
	if err != nil {
		up.conn.Close()
		var ce *codecError
		if errors.As(err, &ce) && ce.status != 502 {
			err = errBadUpstream // the upstream's message, not the client's
		}
		return false, err
	}
	if respClose {
		up.conn.Close()
	} else {
		p.put(up)
	}
	return !rc.req.close, nil
}

// exchange writes the request to an upstream connection and waits for the first
// byte of its answer. A pooled connection the upstream closed while idle is replaced
// once, when the request has no body (nothing of it was consumed).
func (p *rawProxy) exchange(rc *rawConn) (*upstreamConn, error) {
	for attempt := 0; ; attempt++ {
		up, reused, err := p.get()
		if err != nil {
			return nil, err
		}
		err = rc.writeRequest(up)
		if err == nil {
			_, err = up.r.Peek(1)
		}
		if err == nil {
			return up, nil
		}
		up.conn.Close()
		bodyless := !rc.req.chunked && rc.req.contentLength <= 0
		if !reused || !bodyless || attempt > 0 {
			return nil, err
		}
	}
}

func (rc *rawConn) writeRequest(up *upstreamConn) error {
	h, w := &rc.req, up.w
	w.Write(h.bytes(h.method))
	w.WriteByte(' ')
	w.Write(h.bytes(h.target))
	w.WriteString(" HTTP/1.1\r\n")
	writeFields(w, h)
	if rc.xff != nil {
		w.WriteString("X-Forwarded-For: ")
		w.Write(rc.xff)
		w.WriteString("\r\n")
	}
	if err := rc.copyBody(w, rc.r, h); err != nil {
		return err
	}
	return w.Flush()
}

// copyResponse reads the upstream's response head, writes it to the client and
// copies its body. respClose says the upstream connection cannot be reused.
func (rc *rawConn) copyResponse(up *upstreamConn) (respClose bool, err error) {
	h := &up.resp
	for {
		if err := h.readResponse(up.r); err != nil {
			return true, err
		}
		if h.status >= 200 || h.status == 101 {
			break
		}
		// An interim response goes to the client as it came; the final one follows.
		writeStatus(rc.w, h)
		writeFields(rc.w, h)
		rc.w.WriteString("\r\n")
	}
	w := rc.w
	writeStatus(w, h)
	writeFields(w, h)
	if rc.req.close {
		w.WriteString("Connection: close\r\n")
	}
	noBody := string(rc.req.bytes(rc.req.method)) == "HEAD" || h.status == 204 || h.status == 304
	switch {
	case noBody:
		if h.contentLength >= 0 {
			writeLength(w, h.contentLength)
		}
		w.WriteString("\r\n")
		return h.close, nil
	case !h.chunked && h.contentLength < 0:
		// Delimited by the upstream closing: so too to the client.
		w.WriteString("Connection: close\r\n\r\n")
		_, err := w.ReadFrom(up.r)
		rc.req.close = true
		return true, err
	}
	return h.close, rc.copyBody(w, up.r, h)
}

func writeStatus(w *bufio.Writer, h *head) {
	w.WriteString("HTTP/1.1 ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(h.status), 10))
	w.WriteByte(' ')
	w.Write(h.bytes(h.target))
	w.WriteString("\r\n")
}

// writeFields writes the fields of h that go to the next hop.
func writeFields(w *bufio.Writer, h *head) {
	for _, f := range h.fields {
		if !h.forwarded(f) {
			continue
		}
		w.Write(h.bytes(f.name))
		w.WriteString(": ")
		w.Write(h.bytes(f.value))
		w.WriteString("\r\n")
	}
}

func writeLength(w *bufio.Writer, n int64) {
	w.WriteString("Content-Length: ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), n, 10))
	w.WriteString("\r\n")
}

// copyBody ends the head in w with its framing header and copies the body that h
// announces from r: Content-Length bytes, or chunks re-framed one by one.
func (rc *rawConn) copyBody(w *bufio.Writer, r *bufio.Reader, h *head) error {
	switch {
	case h.chunked:
		w.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		return rc.copyChunked(w, r)
	case h.contentLength > 0:
		writeLength(w, h.contentLength)
		w.WriteString("\r\n")
		return rc.copyN(w, r, h.contentLength)
	case h.contentLength == 0:
		writeLength(w, 0)
	}
	w.WriteString("\r\n")
	return nil
}

// copyN copies n bytes from r to w: what r holds already from its buffer, the rest
// through a pooled 32 KiB buffer, which bufio reads into and writes from directly
// (one system call per 32 KiB rather than per 4 KiB on large bodies).
func (rc *rawConn) copyN(w *bufio.Writer, r *bufio.Reader, n int64) error {
	if k := int(min(n, int64(r.Buffered()))); k > 0 {
		b, _ := r.Peek(k)
		if _, err := w.Write(b); err != nil {
			return err
		}
		r.Discard(k)
		n -= int64(k)
	}
	if n == 0 {
		return nil
	}
	buf := rc.bufs.Get()
	defer rc.bufs.Put(buf)
	for n > 0 {
		k, err := r.Read(buf[:min(n, int64(len(buf)))])
		if _, werr := w.Write(buf[:k]); werr != nil {
			return werr
		}
		n -= int64(k)
		if err != nil && n > 0 {
			return noEOF(err)
		}
	}
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// copyChunked copies a chunked body (RFC 9112 section 7.1): sizes are hex digits only,
// extensions are dropped, every chunk must end in CRLF, trailer fields are passed on.
func (rc *rawConn) copyChunked(w *bufio.Writer, r *bufio.Reader) error {
	trailer := &rc.chunk
	for {
		trailer.reset()
		line, err := trailer.readLine(r)
		if err != nil {
			return noEOF(err)
		}
		size, err := chunkSize(trailer.bytes(line))
		if err != nil {
			return err
		}
		w.Write(strconv.AppendInt(w.AvailableBuffer(), size, 16))
		w.WriteString("\r\n")
		if size == 0 {
			break
		}
		if err := rc.copyN(w, r, size); err != nil {
			return err
		}
		crlf, err := r.Peek(2)
		if err != nil {
			return noEOF(err)
		}
		if crlf[0] != '\r' || crlf[1] != '\n' {
			return errChunk
		}
		r.Discard(2)
		w.WriteString("\r\n")
	}
	trailer.reset()
	if err := trailer.readFields(r); err != nil {
		return err
	}
	writeFields(w, trailer)
	_, err := w.WriteString("\r\n")
	return err
}

// chunkSize parses a chunk-size line: 1 to 15 hex digits, then nothing or
// optional whitespace and a ';' that starts extensions (checked for control bytes).
func chunkSize(line []byte) (int64, error) {
	var n int64
	i := 0
	for ; i < len(line) && i < 16; i++ {
		c := line[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			goto ext
		}
		n = n<<4 | int64(d)
	}
ext:
	if i == 0 || i > 15 {
		return 0, errChunk
	}
	rest := line[i:]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0] != ';' {
		return 0, errChunk
	}
	for _, c := range rest {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return 0, errChunk
		}
	}
	return n, nil
}

func (p *rawProxy) get() (up *upstreamConn, reused bool, err error) {
	if up := p.pool.take(); up != nil {
		return up, true, nil
	}
	up, err = dialUpstream(p.backend)
	return up, false, err
}

func (p *rawProxy) put(up *upstreamConn) { p.pool.put(up) }
