package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"

	"github.com/portico-dev/portico/internal/proxy/http1"
)

// rawProxy is the codec floor: HTTP/1.1 on raw connections, one goroutine per client
// connection and none per request, a buffered reader and writer per connection, the
// strict parser Portico's proxy uses (internal/proxy/http1) into a head reused from
// request to request, Content-Length and chunked bodies copied through as they arrive,
// one pooled upstream connection per exchange. It started as the prototype that decided
// for a codec of our own (docs/dev/http1-codec.md); it measures what such a codec costs,
// with no timeouts, upgrades, trailers beyond passing them on, or 100-continue handling:
// not a proxy to ship.
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
	req  http1.Head
	body http1.BodyReader
	xff  []byte
}

// requestLimits are Portico's documented request head limits.
var requestLimits = http1.Limits{MaxHeadBytes: 60 << 10, MaxFields: 100}

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
		if err := rc.req.ReadRequest(rc.r, requestLimits); err != nil {
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
	var ce *http1.Error
	switch {
	case errors.As(err, &ce):
		status, reason = ce.Status, ce.Reason
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
	errUpgrade     = &http1.Error{Status: 501, Reason: "the raw side does not forward upgrades"}
	errBadUpstream = &http1.Error{Status: 502, Reason: "the upstream's response could not be read"}
)

// forward sends the request in rc.req upstream and its response back. keep says
// whether the client connection can carry another request.
func (p *rawProxy) forward(rc *rawConn) (keep bool, err error) {
	if rc.req.Upgrade {
		return false, errUpgrade
	}
	up, err := p.exchange(rc)
	if err != nil {
		return false, err
	}
	respClose, err := rc.copyResponse(up)
	if err != nil {
		up.conn.Close()
		var ce *http1.Error
		if errors.As(err, &ce) && ce.Status != 502 {
			err = errBadUpstream // the upstream's message, not the client's
		}
		return false, err
	}
	if respClose {
		up.conn.Close()
	} else {
		p.put(up)
	}
	return !rc.req.Close, nil
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
		bodyless := !rc.req.Chunked && rc.req.ContentLength <= 0
		if !reused || !bodyless || attempt > 0 {
			return nil, err
		}
	}
}

func (rc *rawConn) writeRequest(up *upstreamConn) error {
	h, w := &rc.req, up.w
	w.Write(h.Method())
	w.WriteByte(' ')
	w.Write(h.Target())
	w.WriteString(" HTTP/1.1\r\n")
	writeFields(w, h)
	if rc.xff != nil {
		w.WriteString("X-Forwarded-For: ")
		w.Write(rc.xff)
		w.WriteString("\r\n")
	}
	rc.body.Reset(rc.r, h)
	if err := rc.copyBody(w, &rc.body, h); err != nil {
		return err
	}
	return w.Flush()
}

// copyResponse reads the upstream's response head, writes it to the client and
// copies its body. respClose says the upstream connection cannot be reused.
func (rc *rawConn) copyResponse(up *upstreamConn) (respClose bool, err error) {
	h := &up.resp
	for {
		if err := h.ReadResponse(up.r, http1.Limits{}); err != nil {
			return true, err
		}
		if h.Status >= 200 || h.Status == 101 {
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
	if rc.req.Close {
		w.WriteString("Connection: close\r\n")
	}
	up.body.ResetResponse(up.r, h, string(rc.req.Method()) == "HEAD")
	switch {
	case up.body.Done(): // HEAD, 204, 304: the length is the GET's, no body follows
		if h.ContentLength >= 0 {
			writeLength(w, h.ContentLength)
		}
		w.WriteString("\r\n")
		return h.Close, nil
	case up.body.UntilEOF():
		// Delimited by the upstream closing: so too to the client.
		w.WriteString("Connection: close\r\n\r\n")
		_, err := w.ReadFrom(up.r)
		rc.req.Close = true
		return true, err
	}
	return h.Close, rc.copyBody(w, &up.body, h)
}

func writeStatus(w *bufio.Writer, h *http1.Head) {
	w.WriteString("HTTP/1.1 ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(h.Status), 10))
	w.WriteByte(' ')
	w.Write(h.Reason())
	w.WriteString("\r\n")
}

// writeFields writes the fields of h that go to the next hop.
func writeFields(w *bufio.Writer, h *http1.Head) {
	for i := range h.NumFields() {
		name, value := h.Field(i)
		if !forwarded(h, name) {
			continue
		}
		w.Write(name)
		w.WriteString(": ")
		w.Write(value)
		w.WriteString("\r\n")
	}
}

// forwarded reports whether a field goes to the next hop: not hop-by-hop (direct.go's
// list, RFC 9110 section 7.6.1), not named by a Connection field, and not
// Content-Length, which the proxy writes for itself.
func forwarded(h *http1.Head, name []byte) bool {
	for hop := range hopByHop {
		if bytes.EqualFold(name, []byte(hop)) {
			return false
		}
	}
	return !bytes.EqualFold(name, []byte("Content-Length")) && !h.ConnectionNames(name)
}

func writeLength(w *bufio.Writer, n int64) {
	w.WriteString("Content-Length: ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), n, 10))
	w.WriteString("\r\n")
}

// copyBody ends the head in w with its framing field and copies the body that h
// announces from body: Content-Length bytes, or chunks re-framed as they are read,
// extensions dropped, the trailer passed on.
func (rc *rawConn) copyBody(w *bufio.Writer, body *http1.BodyReader, h *http1.Head) error {
	switch {
	case h.Chunked:
		w.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if err := rc.copyData(http1.ChunkedWriter{W: w}, body); err != nil {
			return err
		}
		w.WriteString("0\r\n")
		writeFields(w, &body.Trailer)
		_, err := w.WriteString("\r\n")
		return err
	case h.ContentLength >= 0:
		writeLength(w, h.ContentLength)
	}
	w.WriteString("\r\n")
	return rc.copyData(w, body)
}

// copyData copies a body through a pooled 32 KiB buffer, which bufio reads into and
// writes from directly (one system call per 32 KiB rather than per 4 KiB on large
// bodies).
func (rc *rawConn) copyData(w io.Writer, body *http1.BodyReader) error {
	if body.Done() {
		return nil
	}
	buf := rc.bufs.Get()
	defer rc.bufs.Put(buf)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (p *rawProxy) get() (up *upstreamConn, reused bool, err error) {
	if up := p.pool.take(); up != nil {
		return up, true, nil
	}
	up, err = dialUpstream(p.backend)
	return up, false, err
}

func (p *rawProxy) put(up *upstreamConn) { p.pool.put(up) }
