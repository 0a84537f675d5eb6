package http1

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/portico-dev/portico/internal/proxy/internal/stackgrow"
)

// Server serves HTTP/1.1 connections, handing each request to Handler as
// net/http's server would (the same *http.Request fields, an
// http.ResponseWriter that http.ResponseController can flush, hijack and set
// deadlines on), with one goroutine per connection and none per request.
//
// Differences from net/http's server a handler can see: the request's context
// is the connection's (it is not cancelled when the client goes away: a write
// fails instead, as in fasthttp); the body of a response is never sniffed for
// a Content-Type (Envoy does not either); a request body can be read after the
// response has started (full duplex, as in Envoy); the *http.Request, its URL
// and its Header are the connection's, reused for its next request, so a
// handler keeps none of them once it has returned (as fasthttp's RequestCtx).
//
// A connection whose client asked for it to close with the request just
// answered, read whole with nothing after it in the server's buffer, is closed
// with its CloseAsked method when it has one (AskedCloser), instead of Close:
// the connection looks at its socket for the rest.
type Server struct {
	Handler http.Handler
	// BaseContext is the root of every connection's context.
	BaseContext context.Context
	// ConnContext, if set, derives a connection's context, as
	// http.Server.ConnContext does.
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// ConnState, if set, is told of a connection's states as
	// http.Server.ConnState is (New, Active, Idle, Hijacked, Closed).
	ConnState func(net.Conn, http.ConnState)
	// ReadHeaderTimeout bounds the reading of a request head once its first
	// byte has arrived; 0: no bound.
	ReadHeaderTimeout time.Duration
	Limits            Limits
	Log               *slog.Logger
	// H2C, if set, takes the connections that open with the HTTP/2
	// connection preface (h2c with prior knowledge): the server looks for it
	// before the first request and hands such a connection over, its bytes
	// read so far replayed, after telling ConnState it was hijacked.
	H2C func(net.Conn)
	// Refused, if set, is told of each request the codec answers itself
	// because it cannot be read (status 400, 431, 501 or 505).
	Refused func(status int, reason string)
	// HeadTimeout, if set, is ReadHeaderTimeout's bound for the connection
	// whose context is ctx, in its place (a listener's chains each have
	// their own).
	HeadTimeout func(ctx context.Context) time.Duration
	// StreamIdleTimeout, if set, is the stream idle timeout of the
	// connection whose context is ctx, read when it opens: a write to the
	// client that makes no progress for that long fails and the connection
	// closes, whether the handler writes or the codec flushes after it
	// returned (deadline.go). A handler changes it for its response with
	// the response's SetWriteIdleTimeout. Unset or 0: writes are not bounded.
	StreamIdleTimeout func(ctx context.Context) time.Duration

	// readers and writers are the connections' buffers, reused from closed
	// connections to new ones (a connection per request makes them most of
	// what a connection allocates).
	readers bufPool[*bufio.Reader]
	writers bufPool[*bufio.Writer]

	mu       sync.Mutex
	conns    map[*conn]struct{}
	shutdown atomic.Bool
	// served is len(conns), read without mu by connections deciding whether
	// to yield (conn.serve).
	served atomic.Int32
	date   dateCache
}

// bufferSize is a connection's read and write buffer size.
const bufferSize = 4 << 10

// connection states, for Shutdown.
const (
	stateActive int32 = iota
	stateIdle
	stateNew // no request yet
)

// newConnGrace is how long Shutdown leaves a connection that has not sent its
// first request yet, as net/http's server does: a client that has just
// connected is about to send one, and closing the connection under it would
// lose that request (a reset the client may not retry). Its request is
// served, and the connection closed after the response.
const newConnGrace = 5 * time.Second

// conn is one client connection.
type conn struct {
	srv *Server
	rwc net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer // writes to out
	out ConnWriter
	// streamIdle is the connection's stream idle timeout, each request's
	// until its handler sets another.
	streamIdle time.Duration
	// template is the fields every request of the connection shares, its
	// context included.
	template   *http.Request
	remoteAddr string
	remote     netip.AddrPort // remoteAddr parsed
	state      atomic.Int32
	accepted   time.Time // when ServeConn got the connection, for newConnGrace
	hijacked   bool
	// closeAsked says the last request asked for the connection to close
	// and was read whole: the client sends nothing more (AskedCloser).
	closeAsked bool

	// cancel ends the connection's context, which its requests share: one
	// request is served at a time, and a client gone ends the connection.
	cancel  context.CancelCauseFunc
	watch   watcher
	reqBody *requestBody // the current request's body; nil without one

	head Head
	body BodyReader
	rw   response
	// names holds canonicalised header names that the head did not spell
	// canonically, reused from request to request.
	names []byte
	// req, url, header and values are the current request's, reused from
	// request to request: nothing keeps a request once its handler has
	// returned and its body is closed (the connection manager forwards a
	// copy; the access log copies the URL).
	req    http.Request
	url    url.URL
	header http.Header
	values []string
	// kept is what the handler keeps from one request to the next (Kept).
	kept any
}

// ServeConn serves c until it closes. br, if not nil, holds bytes already read
// from c (a protocol sniff) and is read from instead of c.
func (s *Server) ServeConn(c net.Conn, br *bufio.Reader) {
	stackgrow.Reserve() // this goroutine serves the connection's requests
	pooled := br == nil
	if pooled {
		br = s.readers.get(c)
	}
	cn := &conn{srv: s, rwc: c, br: br, remoteAddr: c.RemoteAddr().String()}
	cn.remote, _ = netip.ParseAddrPort(cn.remoteAddr)
	cn.out.conn = c
	cn.bw = s.writers.get(&cn.out)
	defer func() {
		if cn.hijacked {
			return // the buffers went with the connection
		}
		if pooled {
			s.readers.put(br)
		}
		s.writers.put(cn.bw)
	}()
	cn.rw.c = cn
	ctx := s.BaseContext
	if ctx == nil {
		ctx = context.Background()
	}
	ctx = context.WithValue(ctx, http.LocalAddrContextKey, c.LocalAddr())
	if s.ConnContext != nil {
		ctx = s.ConnContext(ctx, c)
	}
	ctx, cn.cancel = context.WithCancelCause(ctx)
	defer cn.cancel(nil)
	cn.watch.c = cn
	cn.template = (&http.Request{Proto: "HTTP/1.1", ProtoMajor: 1, RemoteAddr: cn.remoteAddr}).WithContext(ctx)
	if s.StreamIdleTimeout != nil {
		cn.streamIdle = s.StreamIdleTimeout(ctx)
		cn.out.reset(cn.streamIdle) // bounds the answer to a request refused before it is served
	}
	if !s.track(cn, true) {
		_ = c.Close()
		return
	}
	cn.accepted = time.Now()
	s.setState(cn, http.StateNew)
	cn.serve()
}

func (s *Server) track(c *conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutdown.Load() {
			return false
		}
		if s.conns == nil {
			s.conns = make(map[*conn]struct{})
		}
		s.conns[c] = struct{}{}
		s.served.Store(int32(len(s.conns)))
		return true
	}
	delete(s.conns, c)
	s.served.Store(int32(len(s.conns)))
	return true
}

func (s *Server) setState(c *conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		c.state.Store(stateNew)
	case http.StateIdle:
		c.state.Store(stateIdle)
	default:
		c.state.Store(stateActive)
	}
	if s.ConnState != nil {
		s.ConnState(c.rwc, st)
	}
}

// Shutdown stops taking requests: idle connections close at once, busy ones
// after the response in progress. It returns when every connection has
// closed or ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdown.Store(true)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.closeIdle() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Close closes every connection at once.
func (s *Server) Close() {
	s.shutdown.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		_ = c.rwc.Close()
	}
}

// closeIdle closes the idle connections and returns how many are left.
func (s *Server) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		switch c.state.Load() {
		case stateIdle:
			_ = c.rwc.Close()
		case stateNew:
			if time.Since(c.accepted) >= newConnGrace {
				_ = c.rwc.Close()
			}
		}
	}
	return len(s.conns)
}

func (c *conn) serve() {
	defer func() {
		c.srv.track(c, false)
		if c.hijacked {
			return
		}
		c.close()
		c.srv.setState(c, http.StateClosed)
		if r, ok := c.kept.(releaser); ok {
			c.kept = nil
			r.Release()
		}
	}()
	if tc, ok := c.rwc.(*tls.Conn); ok {
		cs := tc.ConnectionState()
		c.template.TLS = &cs
	}
	if c.srv.H2C != nil {
		h2, err := hasH2Preface(c.br)
		if err != nil {
			return
		}
		if h2 {
			c.hijacked = true
			c.srv.setState(c, http.StateHijacked)
			c.srv.H2C(&replayedConn{Conn: c.rwc, br: c.br})
			return
		}
	}
	for {
		if _, err := c.br.Peek(1); err != nil {
			return
		}
		if c.srv.shutdown.Load() && c.state.Load() != stateNew {
			return // a new connection's first request is served (newConnGrace)
		}
		if err := c.readHead(); err != nil {
			c.refuse(err)
			return
		}
		// Active once the head is read, as with net/http's server: until then
		// the connection's idle timeout cuts a client that stops midway or
		// sends its head a byte at a time.
		c.srv.setState(c, http.StateActive)
		keep := c.serveRequest()
		if c.hijacked || !keep {
			_ = c.bw.Flush()
			return
		}
		// Pipelined requests whose heads are already here are answered
		// before the writes go out, in one system call. Anything less (no
		// bytes, or part of a head: a CRLF some clients send after a body)
		// and the answers leave now: the next read may wait on a client
		// that waits for them.
		if !headBuffered(c.br) {
			if c.bw.Flush() != nil {
				return
			}
		}
		c.forget()
		c.srv.setState(c, http.StateIdle)
		if c.br.Buffered() == 0 && c.srv.served.Load() > 1 {
			// The client sends its next request only once it has read this
			// response: a read made now finds nothing, fails, and parks the
			// goroutine in the poller, a system call and a wake-up for
			// nothing. Other connections' goroutines that are ready run
			// first instead; when the proxy is busy, the request is there
			// by the time this one runs again (at 32 connections, 3 reads
			// per request became 2). Alone on its server, a connection has
			// no one to yield to, and the yield would only cost (3% of the
			// CPU per request with one client).
			runtime.Gosched()
		}
	}
}

// AskedCloser is a connection that can close without waiting for its client
// to close first. The server calls CloseAsked instead of Close when the client
// asked for the close with the request just answered, and the request was read
// whole with nothing after it: a client that still sends (a request it
// pipelined, say) would lose the last response to the reset its bytes
// arriving at a closed socket cause, which a delayed close is there to spare
// it, but this client is not to send anything more (RFC 9112, section 9.6).
type AskedCloser interface {
	CloseAsked() error
}

// close closes the connection, at once when its client asked for it.
func (c *conn) close() {
	if ac, ok := c.rwc.(AskedCloser); ok && c.closeAsked && c.br.Buffered() == 0 {
		_ = ac.CloseAsked()
		return
	}
	_ = c.rwc.Close()
}

// readHead reads a request head, under the header-read timeout when the head
// is not already in the buffer (a deadline costs a timer; most heads arrive
// whole in one read).
func (c *conn) readHead() error {
	if !headBuffered(c.br) {
		if t := c.headTimeout(); t > 0 {
			_ = c.rwc.SetReadDeadline(time.Now().Add(t))
			defer c.rwc.SetReadDeadline(time.Time{})
		}
	}
	return c.head.ReadRequest(c.br, c.srv.Limits)
}

func (c *conn) headTimeout() time.Duration {
	if f := c.srv.HeadTimeout; f != nil {
		return f(c.template.Context())
	}
	return c.srv.ReadHeaderTimeout
}

// headBuffered reports whether br holds a whole head (an empty line).
func headBuffered(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	for i := 3; i < len(b); i++ {
		if b[i] == '\n' && b[i-1] == '\r' && b[i-2] == '\n' && b[i-3] == '\r' {
			return true
		}
	}
	return false
}

// maxRetained bounds the buffers a connection keeps from one request to the
// next: one that once carried a large head does not hold its memory while
// idle (nginx frees its large header buffers likewise).
const maxRetained = 8 << 10

// maxRetainedFields bounds the header fields whose room a connection keeps
// from one request to the next (its header map and values).
const maxRetainedFields = 32

// forget drops what the connection holds of the request it served: the
// request and its body, the response's fields, and the buffers a large head
// grew.
func (c *conn) forget() {
	c.reqBody, c.rw.req = nil, nil
	c.req, c.url = http.Request{}, url.URL{}
	clear(c.rw.header)
	if len(c.header) > maxRetainedFields || len(c.values) > maxRetainedFields {
		// A map grown large (by the head, or by fields a handler added)
		// would cost its size to clear at every request.
		c.header, c.values = nil, nil
	} else {
		clear(c.header)
		clear(c.values)
	}
	c.head.shrink(maxRetained)
	c.body.Trailer.shrink(maxRetained)
	if cap(c.names) > maxRetained {
		c.names = nil
	}
}

// refuse answers a request the codec cannot read, then the connection
// closes. A read error (the client went away, a timeout) gets no answer, as
// in net/http.
func (c *conn) refuse(err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	if c.srv.Refused != nil {
		c.srv.Refused(e.Status, e.Reason)
	}
	w := c.bw
	_, _ = w.WriteString("HTTP/1.1 ")
	writeStatusCode(w, e.Status)
	_, _ = w.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: ")
	body := http.StatusText(e.Status) + ": " + e.Reason
	_, _ = w.Write(appendInt(w.AvailableBuffer(), int64(len(body))))
	_, _ = w.WriteString("\r\n\r\n")
	_, _ = w.WriteString(body)
	_ = w.Flush()
}

// serveRequest builds the request from the head read, serves it and
// finishes its response; keep says whether the connection carries another.
func (c *conn) serveRequest() (keep bool) {
	req, err := c.newRequest()
	if err != nil {
		c.refuse(err)
		return false
	}
	w := &c.rw
	w.reset(req, &c.head)
	c.out.reset(c.streamIdle)
	if c.head.ExpectOther {
		w.closeAfter = true
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusExpectationFailed)
		w.finish()
		return false
	}
	// A response is sent once whole, unless the answers to pipelined
	// requests already here are to leave with it (serve), or the request's
	// body, whose end can still change the head (endBody), is being read; nor
	// when the connection closes after it (Write).
	w.sendWhole = c.reqBody == nil && !headBuffered(c.br)
	c.watch.arm(c.reqBody, c.head.Upgrade)
	ok := c.callHandler(w, req)
	c.watch.disarm()
	if !ok || c.template.Context().Err() != nil || c.hijacked {
		return false
	}
	// The body the handler left is dealt with before the head is written, so
	// that the head can say whether the connection stays.
	whole := c.endBody(req, w.closeAfter)
	if !whole {
		w.closeAfter = true
	}
	w.finish()
	c.closeAsked = whole && c.head.Close
	return !w.closeAfter
}

// callHandler runs the handler; false if it aborted the request (a panic:
// http.ErrAbortHandler, or a bug, logged), which closes the connection.
func (c *conn) callHandler(w *response, req *http.Request) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			ok = false
			if p != http.ErrAbortHandler && c.srv.Log != nil {
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				c.srv.Log.Error("panic serving request", "remote", c.remoteAddr, "panic", p, "stack", string(buf))
			}
			if b := c.reqBody; b != nil {
				b.close()
			}
		}
	}()
	c.srv.Handler.ServeHTTP(w, req)
	return true
}

// bodyLeftLarge reports, as the response head is written, whether the
// request body has more left to read than would be dropped to keep the
// connection (or an unknown amount, chunked): the head then says the
// connection closes, as net/http's does, since the client could not otherwise
// tell that its next request would find the connection gone.
func (c *conn) bodyLeftLarge() bool {
	b := c.reqBody
	if b == nil {
		return false
	}
	if !b.mu.TryLock() {
		// A read on another goroutine (the upstream request's) holds the
		// body, perhaps waiting for the client, which may be waiting for
		// this head: its end is unknown, as a chunked body's.
		return !b.finished.Load()
	}
	defer b.mu.Unlock()
	if c.body.Done() {
		return false
	}
	return !c.bodyArrived() || c.head.Expect100 && !c.rw.continued
}

// continued reports whether a 100 Continue was sent, under the response's
// lock, which the body's reader takes to send it.
func (c *conn) continued() bool {
	c.rw.mu.Lock()
	defer c.rw.mu.Unlock()
	return c.rw.continued
}

// endBody closes the request body after the handler: what it left unread is
// dropped to keep the connection when all of it has arrived already; else the
// connection closes after the answer (bodyArrived).
func (c *conn) endBody(req *http.Request, closing bool) bool {
	// The conn's own record: a handler may have replaced req.Body (the
	// connection manager wraps it for filters).
	b := c.reqBody
	if b == nil {
		return true
	}
	b.close()
	if c.body.Done() {
		return true
	}
	if closing || c.body.Err() != nil || (c.head.Expect100 && !c.continued()) || !c.bodyArrived() {
		// Closing anyway, broken, never sent (no 100 Continue), or not all
		// here: the rest is never waited for, as the client may be waiting
		// for the answer rather than sending (Envoy closes too).
		return false
	}
	_, _ = c.br.Discard(int(c.body.remaining))
	return true
}

// bodyArrived reports whether the rest of a Content-Length body the handler
// left unread is already in the connection's buffer (dropping it keeps the
// connection without a wait); a chunked body's end is not looked for.
func (c *conn) bodyArrived() bool {
	return !c.body.chunked && !c.body.inChunk && c.body.remaining <= int64(c.br.Buffered())
}

// newRequest builds the *http.Request net/http would from c.head. The head's
// names, values, method and target become substrings of one string: one
// allocation for all of them.
func (c *conn) newRequest() (*http.Request, error) {
	h := &c.head
	all := string(h.buf)
	sub := func(s span) string { return all[s.start:s.end] }
	// A copy of the connection's template carries its context: WithContext
	// would allocate a second request.
	req := &c.req
	*req = *c.template
	req.Method, req.RequestURI = method(h.Method(), sub(h.method)), sub(h.target)
	req.ProtoMinor, req.Close = h.Minor, h.Close
	if h.Minor == 0 {
		req.Proto = "HTTP/1.0"
	}
	if err := readTarget(&c.url, req.Method, req.RequestURI); err != nil {
		return nil, badMessage("malformed request target")
	}
	req.URL = &c.url
	req.Header = c.readHeader(h, all)
	req.Host = req.URL.Host
	if hosts := req.Header["Host"]; len(hosts) > 0 {
		if req.Host == "" {
			req.Host = hosts[0]
		}
		delete(req.Header, "Host")
	}
	if !httpguts.ValidHostHeader(req.Host) {
		return nil, badMessage("malformed Host header")
	}
	c.setBody(req)
	return req, nil
}

// readTarget reads a request target into u as net/http does
// (parseTarget), without an allocation for the usual target: a path that
// url.URL keeps verbatim, then perhaps a query.
func readTarget(u *url.URL, method, target string) error {
	if path, query, ok := verbatimTarget(target); ok {
		*u = url.URL{Path: path, RawQuery: query}
		return nil
	}
	parsed, err := parseTarget(method, target)
	if err != nil {
		return err
	}
	*u = *parsed
	return nil
}

// verbatimTarget splits an origin-form target whose path url.ParseRequestURI
// takes as it is (no escapes: its Path is the bytes, its RawPath empty) and
// whose query holds no control byte; ok is false for every other target.
func verbatimTarget(target string) (path, query string, ok bool) {
	if target == "" || target[0] != '/' {
		return "", "", false
	}
	path, query, hasQuery := strings.Cut(target, "?")
	if hasQuery && query == "" {
		return "", "", false // a lone trailing '?' is url.URL's ForceQuery
	}
	for i := 0; i < len(path); i++ {
		if !pathVerbatim[path[i]] {
			return "", "", false
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c < ' ' || c == 0x7f {
			return "", "", false
		}
	}
	return path, query, true
}

// pathVerbatim holds the bytes url.URL writes in a path as they are, as
// net/url itself says: the rest it escapes, so that a path holding them gets
// a RawPath, or it refuses them.
var pathVerbatim = func() (t [256]bool) {
	for c := range 0x80 {
		s := "/" + string(rune(c)) // a path of "*" alone is a special case
		t[c] = (&url.URL{Path: s}).EscapedPath() == s && c != '%' && c >= ' ' && c != 0x7f
	}
	return t
}()

// parseTarget reads a request target as net/http does: a CONNECT's
// authority-form is a host only.
func parseTarget(method, target string) (*url.URL, error) {
	if method == http.MethodConnect && len(target) > 0 && target[0] != '/' {
		if _, err := url.ParseRequestURI("http://" + target); err != nil {
			return nil, err
		}
		return &url.URL{Host: target}, nil
	}
	return url.ParseRequestURI(target)
}

// readHeader builds the request's header map, names canonicalised as
// net/http does, values substrings of all. The map and the values' backing
// array are the connection's; each name's slice is capped, so that a value
// appended to one goes elsewhere.
func (c *conn) readHeader(h *Head, all string) http.Header {
	n := h.NumFields()
	if c.header == nil {
		c.header = make(http.Header, n)
	}
	if cap(c.values) < n {
		c.values = make([]string, n)
	}
	hdr, values := c.header, c.values[:n]
	for i, f := range h.fields {
		name := c.canonicalName(h, f.name, all)
		v := all[f.value.start:f.value.end]
		if vs, ok := hdr[name]; ok {
			hdr[name] = append(vs, v)
			continue
		}
		values[i] = v
		hdr[name] = values[i : i+1 : i+1]
	}
	return hdr
}

// canonicalName is textproto.CanonicalMIMEHeaderKey of a field name,
// without an allocation when the name is spelt canonically or is common.
func (c *conn) canonicalName(h *Head, s span, all string) string {
	name := h.bytes(s)
	upper := true
	canonical := true
	for _, ch := range name {
		if upper && 'a' <= ch && ch <= 'z' || !upper && 'A' <= ch && ch <= 'Z' {
			canonical = false
			break
		}
		upper = ch == '-'
	}
	if canonical {
		return all[s.start:s.end]
	}
	c.names = append(c.names[:0], name...)
	upper = true
	for i, ch := range c.names {
		if upper {
			c.names[i] = upperByte(ch)
		} else {
			c.names[i] = lower(ch)
		}
		upper = ch == '-'
	}
	if v, ok := commonNames[string(c.names)]; ok {
		return v
	}
	return textproto.CanonicalMIMEHeaderKey(string(c.names))
}

func upperByte(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// commonNames interns the header names most requests carry.
var commonNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Length", "Content-Type", "Cookie", "Expect", "Host", "If-Modified-Since",
		"If-None-Match", "Keep-Alive", "Origin", "Pragma", "Referer", "Te", "Trailer", "Transfer-Encoding",
		"Upgrade", "User-Agent", "X-Forwarded-For", "X-Forwarded-Proto", "X-Request-Id", "Grpc-Timeout",
		"Content-Encoding", "Range", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Protocol",
		"Sec-Websocket-Extensions", "Traceparent", "Tracestate"} {
		m[n] = n
	}
	return m
}()

// method interns the common methods.
func method(b []byte, s string) string {
	switch string(b) {
	case "GET":
		return http.MethodGet
	case "POST":
		return http.MethodPost
	case "HEAD":
		return http.MethodHead
	case "PUT":
		return http.MethodPut
	case "DELETE":
		return http.MethodDelete
	case "OPTIONS":
		return http.MethodOptions
	case "PATCH":
		return http.MethodPatch
	}
	return s
}

// setBody gives req its body as the head frames it.
func (c *conn) setBody(req *http.Request) {
	h := &c.head
	c.reqBody = nil
	switch {
	case h.Chunked:
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		delete(req.Header, "Transfer-Encoding") // as net/http: the framing is the codec's
		req.Trailer = http.Header{}
	case h.ContentLength > 0:
		req.ContentLength = h.ContentLength
	default:
		req.Body = http.NoBody
		return
	}
	c.body.Reset(c.br, h)
	c.reqBody = &requestBody{c: c, req: req, expect: h.Expect100 && h.Minor == 1}
	req.Body = c.reqBody
}

// requestBody is a request's body as the handler reads it. It is read
// through the connection's BodyReader until the handler returns; after that
// reads fail, so that nothing (an upstream write still in progress) reads
// the next request.
type requestBody struct {
	c      *conn
	req    *http.Request
	mu     sync.Mutex
	closed bool
	expect bool // 100 Continue is owed before the first read
	// finished says the body has been read to its end, for those who must
	// not wait for mu: a read waiting for the client holds it.
	finished atomic.Bool
}

func (b *requestBody) Read(p []byte) (int, error) {
	// 100 Continue is written without holding mu: the response head, written
	// under the response's lock, looks at the body under mu.
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose // and no 100 Continue into the next exchange
	}
	expect := b.expect
	b.expect = false
	b.mu.Unlock()
	if expect {
		if err := b.c.writeContinue(); err != nil {
			return 0, err
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	n, err := b.c.body.Read(p)
	if b.c.body.Done() {
		b.finished.Store(true)
	}
	if err == io.EOF && b.req.Trailer != nil {
		b.c.trailer(b.req.Trailer)
	}
	return n, err
}

// done reports whether the body has been read to its end.
func (b *requestBody) done() bool { return b.finished.Load() }

func (b *requestBody) Close() error {
	b.close()
	return nil
}

// close ends the body's reads. A read in progress on another goroutine (the
// upstream request's) that may be waiting for the client is cut short rather
// than waited for: the client may be waiting for the response. The body is
// then left in error, and the connection closes after the response.
func (b *requestBody) close() {
	if !b.mu.TryLock() {
		if !b.finished.Load() {
			_ = b.c.rwc.SetReadDeadline(aLongTimeAgo)
			defer b.c.rwc.SetReadDeadline(time.Time{})
		}
		b.mu.Lock()
	}
	b.closed = true
	b.mu.Unlock()
}

func (c *conn) writeContinue() error {
	c.rw.mu.Lock()
	defer c.rw.mu.Unlock()
	if c.rw.continued || c.rw.committed {
		return nil // sent already, or the final response went first
	}
	c.rw.continued = true
	if _, err := c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
		return err
	}
	return c.bw.Flush()
}

// trailer copies the chunked body's trailer fields into t, framing fields
// left out.
func (c *conn) trailer(t http.Header) {
	tr := &c.body.Trailer
	for i := range tr.NumFields() {
		name, value := tr.Field(i)
		key := textproto.CanonicalMIMEHeaderKey(string(name))
		switch key {
		case "Content-Length", "Transfer-Encoding", "Trailer", "Host":
			continue
		}
		t[key] = append(t[key], string(value))
	}
}

// h2Preface opens every HTTP/2 connection (RFC 9113 section 3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// hasH2Preface reads until the connection's first bytes either are the
// HTTP/2 preface or differ from it. It waits only while they could still be
// it: a short HTTP/1 request is not held waiting for 24 bytes.
func hasH2Preface(br *bufio.Reader) (bool, error) {
	for n := 1; ; n = br.Buffered() + 1 {
		b, err := br.Peek(min(n, len(h2Preface)))
		if len(b) > 0 && !strings.HasPrefix(h2Preface, string(b)) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if len(b) == len(h2Preface) {
			return true, nil
		}
	}
}

// replayedConn reads what a bufio.Reader holds of a connection before the
// connection itself.
type replayedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *replayedConn) Read(p []byte) (int, error) { return c.br.Read(p) }

// NetConn is the connection underneath.
func (c *replayedConn) NetConn() net.Conn { return c.Conn }

// bufPool lends connections their read or write buffers; its zero value is
// ready.
type bufPool[B interface{ *bufio.Reader | *bufio.Writer }] struct{ p sync.Pool }

// get returns a buffer on rw: a connection (a reader's) or its ConnWriter
// (a writer's).
func (bp *bufPool[B]) get(rw any) B {
	if b, ok := bp.p.Get().(B); ok {
		resetBuf(b, rw)
		return b
	}
	var b any
	switch any(B(nil)).(type) {
	case *bufio.Reader:
		b = bufio.NewReaderSize(rw.(io.Reader), bufferSize)
	case *bufio.Writer:
		b = bufio.NewWriterSize(rw.(io.Writer), bufferSize)
	}
	return b.(B)
}

func (bp *bufPool[B]) put(b B) {
	resetBuf(b, nil) // no reference to the closed connection
	bp.p.Put(b)
}

// resetBuf points b at rw; nil drops its reference to what it served.
func resetBuf(b any, rw any) {
	switch b := b.(type) {
	case *bufio.Reader:
		r, _ := rw.(io.Reader)
		b.Reset(r)
	case *bufio.Writer:
		w, _ := rw.(io.Writer)
		b.Reset(w)
	}
}
