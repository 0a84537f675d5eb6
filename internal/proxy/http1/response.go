package http1

import (
	"bufio"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunking is how much of a response body without a
// Content-Length is held back so that a response that ends within it gets
// one (net/http's rule, with its size).
const bufferBeforeChunking = 2048

// response is the http.ResponseWriter of a connection's current request,
// reused from request to request.
type response struct {
	c      *conn
	req    *http.Request
	head   *Head
	header http.Header

	// mu orders writes to the connection between the handler and a 100
	// Continue sent from a body read on another goroutine. It is taken
	// before the request body's lock, never after.
	mu sync.Mutex

	status      int
	wroteHeader bool // the handler chose the status
	committed   bool // the head is written
	noBody      bool // HEAD, 204, 304: the body is dropped
	chunked     bool
	closeAfter  bool
	continued   bool  // a 100 Continue was sent
	declared    int64 // the handler's Content-Length; -1: none
	written     int64
	pending     []byte // body held back before the head is committed
	keys        []string
	// sendWhole: the response leaves as soon as its declared length is
	// written, before the handler returns (see serveRequest).
	sendWhole bool
}

func (w *response) reset(req *http.Request, head *Head) {
	w.req, w.head = req, head
	if w.header == nil {
		w.header = make(http.Header)
	} else {
		clear(w.header)
	}
	w.status, w.wroteHeader, w.committed, w.noBody, w.chunked = 0, false, false, false, false
	w.closeAfter, w.continued = head.Close, false
	w.declared, w.written, w.sendWhole = -1, 0, false
	w.pending = w.pending[:0]
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.committed || w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("http1: invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.writeInterim(code)
		return
	}
	w.status, w.wroteHeader = code, true
	if cl := w.header.Get("Content-Length"); cl != "" {
		if n, ok := parseLength([]byte(cl)); ok {
			w.declared = n
		} else {
			w.header.Del("Content-Length")
		}
	}
	w.noBody = w.req.Method == http.MethodHead || code == http.StatusNoContent || code == http.StatusNotModified
}

// writeInterim sends a 1xx response at once, with the headers set so far.
func (w *response) writeInterim(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.head.Minor == 0 {
		return // an HTTP/1.0 client cannot read one (RFC 9110 section 15.2)
	}
	if code == http.StatusContinue {
		if w.continued {
			return // the codec sent it when the body was first read
		}
		w.continued = true
	}
	bw := w.c.bw
	writeStatusLine(bw, code)
	// A 1xx has no content (RFC 9110 section 15.2): no framing fields.
	cl, te := w.header["Content-Length"], w.header["Transfer-Encoding"]
	delete(w.header, "Content-Length")
	delete(w.header, "Transfer-Encoding")
	w.writeFields(bw)
	if cl != nil {
		w.header["Content-Length"] = cl
	}
	if te != nil {
		w.header["Transfer-Encoding"] = te
	}
	_, _ = bw.WriteString("\r\n")
	_ = bw.Flush()
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if w.noBody {
		if w.req.Method == http.MethodHead {
			w.written += int64(len(p))
			return len(p), nil
		}
		return 0, http.ErrBodyNotAllowed
	}
	if w.declared >= 0 && w.written+int64(len(p)) > w.declared {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.committed {
		if w.declared < 0 && len(w.pending)+len(p) <= bufferBeforeChunking {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.commit(false)
	}
	n, err := w.writeBody(p)
	if err == nil && w.sendWhole && !w.closeAfter && w.written == w.declared {
		// Whole: nothing the handler still does (its logs and metrics, the
		// upstream connection's return to its pool) holds the client up. A
		// response the connection closes after is not sent apart from the
		// close: the client would be woken twice, for the bytes and then for
		// the end.
		err = w.c.bw.Flush()
	}
	return n, err
}

// writeBody writes p as the framing chosen.
func (w *response) writeBody(p []byte) (int, error) {
	if w.chunked {
		return ChunkedWriter{W: w.c.bw}.Write(p)
	}
	return w.c.bw.Write(p)
}

func (w *response) WriteString(s string) (int, error) {
	return w.Write([]byte(s))
}

// commit writes the head: the status line, the handler's fields and the
// framing. final says the handler has returned, so that a body held back
// gets its Content-Length.
func (w *response) commit(final bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.committed = true
	bw := w.c.bw
	h := w.header
	if hasToken(h["Connection"], "close") || w.c.srv.shutdown.Load() || w.c.bodyLeftLarge() {
		w.closeAfter = true
	}
	delete(h, "Connection")
	delete(h, "Transfer-Encoding")
	switch {
	case w.status == http.StatusSwitchingProtocols:
	case w.noBody:
		if w.req.Method == http.MethodHead && w.declared < 0 && final && w.written > 0 {
			h.Set("Content-Length", strconv.FormatInt(w.written, 10))
		}
		if w.status == http.StatusNoContent {
			delete(h, "Content-Length")
		}
	case w.declared >= 0:
	case final:
		h["Content-Length"] = []string{strconv.Itoa(len(w.pending))}
		w.declared = int64(len(w.pending))
	case w.head.Minor == 1:
		w.chunked = true
	default:
		w.closeAfter = true // delimited by the close
	}
	if _, ok := h["Date"]; !ok {
		h["Date"] = w.c.srv.date.values()
	}
	writeStatusLine(bw, w.status)
	w.writeFields(bw)
	if w.chunked {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	switch {
	case w.closeAfter:
		_, _ = bw.WriteString("Connection: close\r\n")
	case w.head.Minor == 0:
		_, _ = bw.WriteString("Connection: keep-alive\r\n")
	}
	_, _ = bw.WriteString("\r\n")
	if len(w.pending) > 0 {
		p := w.pending
		w.pending = w.pending[:0]
		_, _ = w.writeBody(p)
	}
}

// writeFields writes the header in a stable (sorted) order, dropping invalid
// names and turning line breaks in values into spaces so that no value can
// start a field or a message of its own.
func (w *response) writeFields(bw *bufio.Writer) {
	keys := w.keys[:0]
	for k := range w.header {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range w.header[k] {
			writeField(bw, k, v)
		}
	}
	clear(keys) // the names may hold a large header's text
	w.keys = keys[:0]
}

func writeField(bw *bufio.Writer, k, v string) {
	_, _ = bw.WriteString(k)
	_, _ = bw.WriteString(": ")
	if breaksLine(v) {
		v = strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == 0 {
				return ' '
			}
			return r
		}, v)
	}
	_, _ = bw.WriteString(strings.TrimSpace(v))
	_, _ = bw.WriteString("\r\n")
}

// breaksLine reports whether v holds a CR, LF or NUL, which writeField
// replaces: a loop over bytes, a third of strings.ContainsAny's time on
// usual values (every field of every response comes through).
func breaksLine(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && (c == '\r' || c == '\n' || c == 0) {
			return true
		}
	}
	return false
}

func writeStatusLine(bw *bufio.Writer, code int) {
	if code == http.StatusOK { // most responses: one write of a constant
		_, _ = bw.WriteString("HTTP/1.1 200 OK\r\n")
		return
	}
	_, _ = bw.WriteString("HTTP/1.1 ")
	writeStatusCode(bw, code)
	_ = bw.WriteByte(' ')
	_, _ = bw.WriteString(http.StatusText(code))
	_, _ = bw.WriteString("\r\n")
}

func writeStatusCode(bw *bufio.Writer, code int) {
	_, _ = bw.Write(appendInt(bw.AvailableBuffer(), int64(code)))
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

func hasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// finish ends the response once the handler has returned: the head if it is
// not written, the last chunk and trailers, and whether the connection can
// carry another request.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(true)
	}
	if w.chunked {
		w.writeTrailers()
	}
	if w.declared >= 0 && w.written < w.declared && !w.noBody {
		w.closeAfter = true // the client waits for bytes that will not come
	}
}

// writeTrailers ends a chunked body with the trailer fields the handler set:
// under http.TrailerPrefix, or declared in Trailer and set after the head.
func (w *response) writeTrailers() {
	bw := w.c.bw
	_, _ = bw.WriteString("0\r\n")
	declared := w.header["Trailer"]
	for k, vs := range w.header {
		name, prefixed := strings.CutPrefix(k, http.TrailerPrefix)
		if !prefixed && !hasToken(declared, k) {
			continue
		}
		name = http.CanonicalHeaderKey(name)
		if !httpguts.ValidHeaderFieldName(name) || !httpguts.ValidTrailerHeader(name) {
			continue
		}
		for _, v := range vs {
			writeField(bw, name, v)
		}
	}
	_, _ = bw.WriteString("\r\n")
}

// flushPending sends what the write buffer holds of the answers to earlier
// pipelined requests, from the watch's timer while the handler runs: until
// the head is committed, the handler writes to the buffer only under mu.
func (c *conn) flushPending() {
	c.rw.mu.Lock()
	defer c.rw.mu.Unlock()
	if !c.rw.committed && c.bw.Buffered() > 0 {
		_ = c.bw.Flush()
	}
}

// Flush sends the head and what is buffered of the body.
func (w *response) Flush() { _ = w.FlushError() }

func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commit(false)
	}
	return w.c.bw.Flush()
}

// Hijack hands the connection to the handler (protocol upgrades): the reader
// keeps the bytes that arrived after the request head.
func (w *response) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c := w.c
	w.mu.Lock()
	committed := w.committed
	w.committed = true // the writer is the handler's now: flushPending and 100 Continue keep off it
	w.mu.Unlock()
	if committed {
		return nil, nil, http.ErrHijacked
	}
	c.hijacked = true
	c.out.release()
	c.srv.setState(c, http.StateHijacked)
	return c.rwc, bufio.NewReadWriter(c.br, c.bw), nil
}

func (w *response) SetReadDeadline(t time.Time) error { return w.c.rwc.SetReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline, which then holds
// until the next request instead of the stream idle timeout's.
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.out.setByHandler(t) }

// SetWriteIdleTimeout sets the response's stream idle timeout (a route's
// idle_timeout, which overrides the connection manager's): a write to the
// client that makes no progress for d fails and the connection closes,
// until the response has been flushed after the handler returned; 0: writes
// are not bounded.
func (w *response) SetWriteIdleTimeout(d time.Duration) { w.c.out.SetTimeout(d) }

// EnableFullDuplex is a no-op: a request body can always be read while the
// response is written.
func (w *response) EnableFullDuplex() error { return nil }

// RemoteAddrPort is the client's address, as netip.ParseAddrPort reads the
// request's RemoteAddr, parsed once for the connection's requests.
func (w *response) RemoteAddrPort() netip.AddrPort { return w.c.remote }

// Kept is the connection's slot for what its handler keeps from one request
// to the next: the codec serves one request at a time, so what a handler
// stores there when it is done with it (and nobody else holds it) is its
// own again at the connection's next request. The codec only hands it back
// when the connection ends (and was not hijacked): a value with a Release
// method is released then, after the codec's last write (or once it gave up
// writing) and with no handler running.
func (w *response) Kept() *any { return &w.c.kept }

// releaser is a kept value the handler wants back when its connection ends.
type releaser interface{ Release() }

// NotifyClientGone has l told when the connection's watch finds the client
// gone while the request is served, right after the request's context is
// cancelled: a handler that stops its own work then needs no
// context.AfterFunc. nil stops it; it ends with the request.
func (w *response) NotifyClientGone(l interface{ ClientGone() }) { w.c.watch.notify(l) }

// dateCache formats the Date header once a second.
type dateCache struct {
	mu   sync.Mutex
	sec  int64
	date []string
}

func (d *dateCache) values() []string {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := now.Unix(); s != d.sec || d.date == nil {
		d.sec = s
		d.date = []string{now.UTC().Format(http.TimeFormat)}
	}
	return d.date
}
