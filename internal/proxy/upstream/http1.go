package upstream

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/portico-dev/portico/internal/proxy/http1"
	"github.com/portico-dev/portico/internal/proxy/internal/rawsock"
	"github.com/portico-dev/portico/internal/proxy/internal/sockpeek"
)

// HTTP1Client is an HTTP/1.1 upstream client: the shared clear-text one, or
// a cluster's own (over TLS, or with its idle_timeout). It makes
// the exchange in the caller's goroutine: the request head is written with
// one flush and the response read on the same goroutine, over a pooled
// connection; a request body is written by a goroutine of its own (after the
// upstream's 100 Continue when the request expects one). http.Transport runs
// a read and a write goroutine per connection and hands every request and
// response between them and the caller over channels, which costs CPU on
// every request (docs/performance.md has the figures). What this client does
// not exchange (CONNECT, anything Transport would refuse) goes to fallback,
// unchanged.
type HTTP1Client struct {
	fallback *http.Transport
	// scheme is that of the requests the client exchanges: "http", or
	// "https" for a cluster's client over TLS (newClusterTransport).
	scheme string
	// dial is the fallback's DialContext (DialTLSContext over TLS): both
	// paths connect alike.
	dial               func(ctx context.Context, network, addr string) (net.Conn, error)
	idleTimeout        time.Duration
	maxIdlePerEndpoint int
	// expectContinueTimeout is how long a request that expects 100 Continue
	// waits for it (or for the final response) before its body is sent
	// anyway: the fallback's ExpectContinueTimeout; 0 sends it at once.
	expectContinueTimeout time.Duration

	Mu   sync.Mutex
	Idle map[string][]*http1Conn // by endpoint address; the most recently used last
}

// NewHTTP1Client is the clear-text client in front of fallback.
func NewHTTP1Client(fallback *http.Transport) *HTTP1Client {
	return newHTTP1Client(fallback, "http", fallback.DialContext)
}

// newHTTP1Client is a client of scheme's requests, connecting with dial.
func newHTTP1Client(fallback *http.Transport, scheme string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *HTTP1Client {
	return &HTTP1Client{
		fallback:           fallback,
		scheme:             scheme,
		dial:               dial,
		idleTimeout:        fallback.IdleConnTimeout,
		maxIdlePerEndpoint: fallback.MaxIdleConnsPerHost,
		Idle:               make(map[string][]*http1Conn),

		expectContinueTimeout: fallback.ExpectContinueTimeout,
	}
}

// maxResponseHeaderBytes bounds a response head (1xx heads included), as
// http.Transport's default does.
const maxResponseHeaderBytes = 10 << 20

// http1BufferSize is the size of a connection's read and write buffers
// (http.Transport's default).
const http1BufferSize = 4 << 10

// longAgo is a deadline in the past: setting it unblocks a connection's reads
// and writes at once.
func longAgo() time.Time { return time.Unix(1, 0) }

func (c *HTTP1Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != c.scheme || !inCallerGoroutine(req) {
		return c.fallback.RoundTrip(withInterimTrace(req))
	}
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	// The trace is told of the first connection taken only: one on another,
	// after the first was found stale, serves the same attempt (the
	// connection manager arms a per-try timeout at GotConn).
	connTrace := trace
	fresh := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, context.Cause(ctx)
		}
		pc, err := c.conn(ctx, req, fresh, connTrace)
		if err != nil {
			return nil, err
		}
		connTrace = nil
		target := ctx.Value(TargetKey{})
		pc.interims, _ = target.(InterimReceiver)
		pc.aborts, _ = target.(AbortWatcher)
		pc.room = roomOf(target) // never a room of an earlier exchange's
		if e, ok := target.(CodecExchanger); ok {
			e.CodecExchange(!pc.reused)
		}
		res, err := pc.roundTrip(ctx, req, trace)
		if err == nil {
			return res, nil
		}
		if errors.Is(err, errLookedStale) && ctx.Err() == nil {
			continue // as takeIdle does elsewhere: the next pooled connection, or a new one
		}
		// A pooled connection the server closed while it was idle fails before any
		// response byte: Transport retries such a request on another connection, when
		// nothing was sent or the request is idempotent. One retry, on a new connection:
		// the other pooled ones may be as stale.
		var se *staleConnError
		if !pc.reused || !errors.As(err, &se) || !(se.nothingWritten || isReplayable(req) && !hasBody(req)) || ctx.Err() != nil {
			return nil, err
		}
		fresh = true
	}
}

// inCallerGoroutine reports whether a request can be exchanged by this client:
// not CONNECT, headers Transport would send as they are. An upgrade's 101
// hands the connection over (handOver). A body is written by a goroutine of its own while
// the caller reads the response (hasBody).
func inCallerGoroutine(req *http.Request) bool {
	if req.URL.Host == "" || req.Method == http.MethodConnect {
		return false
	}
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// isReplayable is http.Request's rule for retrying a request whose first
// attempt may have reached the server: no body, and an idempotent method or an
// idempotency key.
func isReplayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return req.Header["Idempotency-Key"] != nil || req.Header["X-Idempotency-Key"] != nil
}

// conn returns an idle connection to req's endpoint, or a new one (always when
// fresh), and tells the trace.
func (c *HTTP1Client) conn(ctx context.Context, req *http.Request, fresh bool, trace *httptrace.ClientTrace) (*http1Conn, error) {
	addr := req.URL.Host
	if trace != nil && trace.GetConn != nil {
		trace.GetConn(addr)
	}
	var pc *http1Conn
	if !fresh {
		pc = c.takeIdle(addr)
	}
	if pc == nil {
		conn, err := c.dial(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		pc = newHTTP1Conn(c, addr, conn)
	}
	if trace != nil && trace.GotConn != nil {
		info := httptrace.GotConnInfo{Conn: pc.conn, Reused: pc.reused, WasIdle: pc.reused}
		if pc.reused {
			info.IdleTime = time.Since(pc.idleSince)
		}
		trace.GotConn(info)
	}
	return pc, nil
}

// takeIdle pops the most recently used idle connection to addr that is still
// open and has received nothing since its last response, as far as a system
// call tells.
//
// The call is made on every reuse, however short the connection's idle time:
// bytes a server sent after its response (a body it should not have sent, a
// response of its own) may arrive just after the response was read, and a
// request sent on that connection would take them for its response (a whole
// response in them would be passed on as the answer to a request it is not
// the answer to). http.Transport sees them at once, from the read its
// connection keeps outstanding, and closes the connection ("Unsolicited
// response received on idle HTTP channel"); here no read is outstanding, so
// the socket is looked at before the connection carries a request: here over
// TLS, and in clear text by the request's first write (http1Conn.Write), in
// the same wait as the response's, a stale connection then failing with
// errLookedStale and RoundTrip taking the next. Bytes
// arriving after that look, once the request is on its way, cannot be told
// from its response by any client, Transport included. Where the socket
// cannot be looked at (elsewhere than on Linux), a stale connection is only
// found out by the request failing on it, and retried on a new connection.
func (c *HTTP1Client) takeIdle(addr string) *http1Conn {
	for {
		c.Mu.Lock()
		conns := c.Idle[addr]
		n := len(conns)
		if n == 0 {
			c.Mu.Unlock()
			return nil
		}
		pc := conns[n-1]
		conns[n-1] = nil
		if n == 1 {
			delete(c.Idle, addr)
		} else {
			c.Idle[addr] = conns[:n-1]
		}
		pc.idle = false
		c.Mu.Unlock()
		// Without a read goroutine watching idle connections, one the server
		// closed (or wrote to unasked) is only found out here, or by the request
		// failing on it. In clear text the look is the exchange's first write's
		// (lookPending), made in the same wait as the response's.
		if pc.br.Buffered() == 0 && (pc.bare || pc.peek == nil || pc.peek.Look() == sockpeek.Empty) {
			pc.reused = true
			pc.lookPending = pc.bare
			return pc
		}
		pc.close()
	}
}

// put returns a connection to its endpoint's pool, or closes it when the pool
// is full.
func (c *HTTP1Client) put(pc *http1Conn) {
	c.Mu.Lock()
	conns := c.Idle[pc.addr]
	if len(conns) >= c.maxIdlePerEndpoint {
		c.Mu.Unlock()
		pc.close()
		return
	}
	c.Idle[pc.addr] = append(conns, pc)
	pc.idle = true
	pc.idleSince = time.Now()
	switch {
	case c.idleTimeout <= 0:
		// idle_timeout 0s: kept until the server closes it, as in Envoy.
	case pc.idleTimer == nil:
		pc.idleTimer = time.AfterFunc(c.idleTimeout, pc.closeIfIdle)
	default:
		pc.idleTimer.Reset(c.idleTimeout)
	}
	c.Mu.Unlock()
}

// closeIfIdle closes a connection idle for the idle timeout. The timer is only
// reset when the connection is pooled again, so a connection in use when it
// fires stays open.
func (pc *http1Conn) closeIfIdle() {
	c := pc.client
	c.Mu.Lock()
	if !pc.idle {
		c.Mu.Unlock()
		return
	}
	c.removeIdleLocked(pc)
	c.Mu.Unlock()
	pc.close()
}

func (c *HTTP1Client) removeIdleLocked(pc *http1Conn) {
	pc.idle = false
	conns := c.Idle[pc.addr]
	for i, other := range conns {
		if other == pc {
			conns = append(conns[:i], conns[i+1:]...)
			conns = conns[: len(conns) : len(conns)+1]
			break
		}
	}
	if len(conns) == 0 {
		delete(c.Idle, pc.addr)
		return
	}
	c.Idle[pc.addr] = conns
}

// CloseIdleConnections closes the pooled connections of both paths;
// connections in use are pooled again when their exchange ends.
func (c *HTTP1Client) CloseIdleConnections() {
	c.Mu.Lock()
	idle := c.Idle
	c.Idle = make(map[string][]*http1Conn)
	for _, conns := range idle {
		for _, pc := range conns {
			pc.idle = false
		}
	}
	c.Mu.Unlock()
	for _, conns := range idle {
		for _, pc := range conns {
			pc.close()
		}
	}
	c.fallback.CloseIdleConnections()
}

// http1Conn is a pooled upstream connection. Only the goroutine that took it
// from the pool (or dialled it) uses it, until it is pooled again.
type http1Conn struct {
	client *HTTP1Client
	addr   string
	conn   net.Conn
	br     *bufio.Reader // reads through the connection's Read, which enforces readLimit
	bw     *bufio.Writer
	peek   *sockpeek.Peeker // nil where the socket cannot be looked at
	// bare: peek is the connection's own socket (a *net.TCPConn), whose
	// bytes are the request's. A pooled bare connection is looked at by the
	// exchange's first write (lookPending) rather than by takeIdle; when that
	// write is the whole head of a request without a body (awaitResponse),
	// the look and the write are made in one wait for the response, which no
	// read that would find nothing precedes: a system call saved per exchange.
	bare          bool
	lookPending   bool
	awaitResponse bool
	// The response being read, reused from exchange to exchange: parsing a
	// head allocates nothing once the connection is warm.
	head http1.Head
	body http1.BodyReader
	keys []string // header names of the request being written, in order
	// unblock ends the connection's reads and writes at once, for a cancelled
	// exchange: made once, not per exchange.
	unblock func()
	// aborts, when it watches the exchange under way, runs unblock when the
	// request is abandoned; afterStop, set otherwise, is the stop of a
	// context.AfterFunc that does (watchAbort).
	aborts    AbortWatcher
	afterStop func() bool
	stopFn    func() bool // stopWatch, bound once
	// interims takes the interim responses of the exchange under way (nil:
	// nobody does but the trace, if any).
	interims InterimReceiver
	// room is where the exchange under way builds its responses (nil: new
	// allocations).
	room *ResponseRoom
	// bodySent receives the result of writing the request body (nil: the
	// request has none, or its result was taken).
	bodySent chan error
	// sendBody tells the body writer of a request that expects 100 Continue
	// whether to send the body (true: the 100 came) or not (a final response
	// came first, or the exchange failed); nil once told, or when the request
	// expects nothing.
	sendBody chan bool
	// bodyFailed is the request body's read failure that cut the exchange;
	// bodyEOF says the writer has read the whole request body.
	bodyFailed atomic.Pointer[bodyReadError]
	bodyEOF    atomic.Bool

	// readLimit is what may still be read of the response head.
	readLimit int64
	sawEOF    bool
	reused    bool
	// tlsState is the connection's TLS state, given to its responses as
	// http.Transport does; nil in clear text.
	tlsState *tls.ConnectionState

	// Guarded by client.mu while the connection is in the pool; the goroutine
	// that took it from the pool owns them until it puts it back.
	idle      bool
	idleSince time.Time
	idleTimer *time.Timer
}

func newHTTP1Conn(c *HTTP1Client, addr string, conn net.Conn) *http1Conn {
	pc := &http1Conn{client: c, addr: addr, conn: conn, readLimit: math.MaxInt64}
	pc.unblock = func() { _ = pc.conn.SetDeadline(longAgo()) }
	pc.stopFn = pc.stopWatch
	pc.br = bufio.NewReaderSize(pc, http1BufferSize)
	pc.bw = bufio.NewWriterSize(pc, http1BufferSize)
	tc, isTLS := conn.(*tls.Conn)
	if isTLS {
		state := tc.ConnectionState()
		pc.tlsState = &state
		// An idle TLS connection carries nothing unasked either: what its
		// socket becomes readable with is a close (or a close_notify).
		conn = tc.NetConn()
	}
	pc.peek = sockpeek.New(conn)
	_, tcp := conn.(*net.TCPConn)
	pc.bare = tcp && !isTLS && pc.peek != nil
	if pc.bare {
		pc.conn = rawsock.Wrap(conn) // read and written with raw system calls
	}
	return pc
}

// Write is the buffered writer's destination. The first write on a pooled
// connection looks at it first (lookPending): one that received anything
// while idle fails with errLookedStale, nothing written. The flush of a
// request with nothing to send after its head (awaitResponse) returns once
// the response can be read.
func (pc *http1Conn) Write(p []byte) (int, error) {
	if !pc.lookPending {
		return pc.conn.Write(p)
	}
	pc.lookPending = false
	if !pc.awaitResponse {
		if pc.peek.Look() != sockpeek.Empty {
			return 0, errLookedStale
		}
		return pc.conn.Write(p)
	}
	pc.awaitResponse = false
	state, n := pc.peek.LookWriteAwait(p)
	if state != sockpeek.Empty {
		return 0, errLookedStale
	}
	if n == len(p) {
		return n, nil
	}
	m, err := pc.conn.Write(p[n:])
	return n + m, err
}

// errLookedStale: a pooled connection received something while idle (its
// close, or bytes it was not asked for), found by the look before the
// request was written on it.
var errLookedStale = errors.New("pooled connection closed or written to while idle")

// Read is the buffered reader's source: it stops a response head that
// exceeds its limit.
func (pc *http1Conn) Read(p []byte) (int, error) {
	if pc.readLimit <= 0 {
		return 0, fmt.Errorf("upstream response headers exceeded %d bytes", maxResponseHeaderBytes)
	}
	if int64(len(p)) > pc.readLimit {
		p = p[:pc.readLimit]
	}
	n, err := pc.conn.Read(p)
	if err == io.EOF {
		pc.sawEOF = true
	}
	pc.readLimit -= int64(n)
	return n, err
}

func (pc *http1Conn) close() {
	if pc.idleTimer != nil {
		pc.idleTimer.Stop()
	}
	_ = pc.conn.Close()
}

// staleConnError is a failure before any byte of the response: the server may
// have closed the connection before it saw the request.
type staleConnError struct {
	err            error
	nothingWritten bool
}

func (e *staleConnError) Error() string {
	return "upstream connection closed before the response: " + e.err.Error()
}

func (e *staleConnError) Unwrap() error { return e.err }

// roundTrip writes req and reads the response head. Cancelling ctx (route or
// per-try timeout, client gone) unblocks the connection at once through its
// deadline; the error is then the context's cause, as http.Transport's. The
// response body keeps the connection until it is read to the end (the
// connection is pooled again) or closed early (it is closed).
func (pc *http1Conn) roundTrip(ctx context.Context, req *http.Request, trace *httptrace.ClientTrace) (*http.Response, error) {
	stop := pc.watchAbort(ctx)
	res, err := pc.exchange(req, trace)
	if err != nil {
		pc.tellBodyWriter(false)
		stop()
		pc.close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	keep := !res.Close && !req.Close && res.StatusCode >= 200
	if res.StatusCode == http.StatusSwitchingProtocols {
		if !isProtocolSwitch(res) {
			// A 101 that names no protocol: the attempt refuses it, and
			// closing its body closes the connection.
			res.Body = &http1Body{body: http.NoBody, pc: pc, ctx: ctx, stop: stop}
			return res, nil
		}
		return pc.handOver(ctx, res, stop)
	}
	if req.Method == http.MethodHead || res.ContentLength == 0 {
		res.Body = http.NoBody
		pc.release(keep, stop)
		return res, nil
	}
	pc.body.ResetResponse(pc.br, &pc.head, false)
	if err := pc.body.CheckBuffered(); err != nil {
		// Framing already known to be broken: a 502 now, rather than a head
		// sent to the client and a cut.
		stop()
		pc.close()
		return nil, &malformedResponseError{err}
	}
	var body *http1Body // not new(http1Body) first, which would be allocated anyway
	if pc.room != nil {
		body = &pc.room.body
	} else {
		body = new(http1Body)
	}
	*body = http1Body{body: &pc.body, res: res, pc: pc, ctx: ctx, keep: keep, stop: stop}
	res.Body = body
	return res, nil
}

// watchAbort has the connection unblocked when ctx is cancelled (route or
// per-try timeout, client gone), by the request's target when it can watch
// ctx, else by context.AfterFunc; the returned stop ends the watch and reports
// whether the unblock had not run.
func (pc *http1Conn) watchAbort(ctx context.Context) (stop func() bool) {
	if pc.aborts != nil && pc.aborts.WatchAbort(ctx, pc.unblock) {
		return pc.stopFn
	}
	pc.aborts = nil
	pc.afterStop = context.AfterFunc(ctx, pc.unblock)
	return pc.stopFn
}

// stopWatch ends the watch watchAbort started; a second call reports false.
func (pc *http1Conn) stopWatch() bool {
	if w := pc.aborts; w != nil {
		pc.aborts = nil
		return w.UnwatchAbort()
	}
	if stop := pc.afterStop; stop != nil {
		pc.afterStop = nil
		return stop()
	}
	return false
}

// isProtocolSwitch reports whether a 101 response switches to a protocol
// (Upgrade names one, Connection lists upgrade), as net/http reads it.
func isProtocolSwitch(res *http.Response) bool {
	return res.Header.Get("Upgrade") != "" && httpguts.HeaderValuesContainsToken(res.Header["Connection"], "Upgrade")
}

// errUpgradeBeforeBody: the upstream switched protocols while the request
// body was still being written, which would mix its bytes with the new
// protocol's.
var errUpgradeBeforeBody = errors.New("the upstream switched protocols before the request body was sent")

// handOver gives an upgraded connection to the caller as res.Body, an
// io.ReadWriteCloser, as http.Transport does: it never returns to the pool,
// and from now on only its caller closes it (the request's context no longer
// does, which the connection manager's splice sees to).
func (pc *http1Conn) handOver(ctx context.Context, res *http.Response, stop func() bool) (*http.Response, error) {
	if pc.bodySent != nil {
		var err error
		select {
		case err = <-pc.bodySent:
		default:
			err = errUpgradeBeforeBody
		}
		pc.bodySent = nil
		if err != nil {
			pc.close()
			return nil, err
		}
	}
	if !stop() {
		pc.close() // the context ended: its deadline has already cut the connection
		return nil, context.Cause(ctx)
	}
	if pc.idleTimer != nil {
		pc.idleTimer.Stop()
	}
	res.Body = &upgradedConn{br: pc.br, conn: pc.conn}
	return res, nil
}

// upgradedConn is the connection of a 101 response: what the reader holds
// of it first (the new protocol's first bytes may have come with the 101),
// then the connection itself.
type upgradedConn struct {
	br   *bufio.Reader // nil once drained
	conn net.Conn
}

func (u *upgradedConn) Read(p []byte) (int, error) {
	if u.br != nil {
		if n := u.br.Buffered(); n > 0 {
			if len(p) > n {
				p = p[:n]
			}
			return u.br.Read(p)
		}
		u.br = nil
	}
	return u.conn.Read(p)
}

func (u *upgradedConn) Write(p []byte) (int, error) { return u.conn.Write(p) }

func (u *upgradedConn) Close() error { return u.conn.Close() }

// CloseWrite half-closes the connection, when it can be.
func (u *upgradedConn) CloseWrite() error {
	if cw, ok := u.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("CloseWrite: not supported by the upstream connection")
}

// exchange writes the request in one flush and reads the response head,
// skipping 1xx heads (given to the trace) other than 101.
func (pc *http1Conn) exchange(req *http.Request, trace *httptrace.ClientTrace) (*http.Response, error) {
	var err error
	if pc.keys, err = writeRequestHead(pc.bw, req, pc.keys); err != nil {
		return nil, fmt.Errorf("writing the request upstream: %w", err)
	}
	pending := pc.bw.Buffered()
	// Only when the head's first write is this flush (lookPending still set:
	// a head larger than the buffer went out in pieces, an answer to which
	// could be there already and would not end the wait), on a pooled
	// connection, which the look covers (on a new one, bytes a server sends
	// unasked, a greeting on a port that is not HTTP, would not end it
	// either). A trace told of the request written is told when it was, not
	// once the response came.
	pc.awaitResponse = pc.lookPending && !hasBody(req) && (trace == nil || trace.WroteRequest == nil)
	err = pc.bw.Flush()
	pc.awaitResponse = false
	if err != nil {
		if pc.bw.Buffered() == pending {
			return nil, &staleConnError{err: err, nothingWritten: true}
		}
		return nil, fmt.Errorf("writing the request upstream: %w", err)
	}
	pc.bodySent = nil
	pc.bodyEOF.Store(false)
	if hasBody(req) {
		pc.bodySent = make(chan error, 1)
		if expectsContinue(req) && pc.client.expectContinueTimeout > 0 {
			pc.sendBody = make(chan bool, 1)
		}
		go pc.writeBody(req, trace, pc.bodySent, pc.sendBody)
	} else if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	pc.readLimit = maxResponseHeaderBytes
	if _, err := pc.br.Peek(1); err != nil {
		if werr := pc.bodyError(); werr != nil {
			return nil, werr // the body failed first, and cut the exchange
		}
		if pc.bodySent != nil {
			return nil, err // the body was (being) sent: not a stale connection
		}
		return nil, &staleConnError{err: err}
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	for first := true; ; first = false {
		res, err := pc.readResponse(req)
		if err != nil {
			if first {
				// Bytes a server sent on the connection while it was idle (a body after a
				// 204, say) are read as this response and do not parse: that connection is
				// as unusable as a closed one, and no response of this request was read.
				return nil, &staleConnError{err: err}
			}
			return nil, err
		}
		if res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			pc.readLimit = math.MaxInt64
			// A final response before the 100: the body is not sent (the
			// connection then closes after the response, release sees to it).
			pc.tellBodyWriter(false)
			return res, nil
		}
		if res.Header["Content-Length"] != nil || res.Header["Transfer-Encoding"] != nil {
			// A 1xx has no content (RFC 9110 sections 8.6 and 15.2): one that
			// announces some makes what follows unreadable; nothing of it is
			// passed on.
			return nil, &malformedResponseError{errInterimFraming}
		}
		if err := pc.gotInterim(res, trace); err != nil {
			return nil, err
		}
		if res.StatusCode == http.StatusContinue && pc.sendBody != nil {
			// After the 100 went on to the client (Got1xxResponse): reading the
			// body before would have the client's server side send one of its own.
			if trace != nil && trace.Got100Continue != nil {
				trace.Got100Continue()
			}
			pc.tellBodyWriter(true)
		}
		// The 1xx heads count against the final head's limit, as in http.Transport:
		// an upstream sending them without end exhausts it.
	}
}

// gotInterim hands an interim response to the request's target and trace.
func (pc *http1Conn) gotInterim(res *http.Response, trace *httptrace.ClientTrace) error {
	if trace != nil && trace.Got1xxResponse != nil {
		if err := trace.Got1xxResponse(res.StatusCode, textproto.MIMEHeader(res.Header)); err != nil {
			return err
		}
	}
	if pc.interims != nil {
		return pc.interims.GotInterim(res.StatusCode, textproto.MIMEHeader(res.Header))
	}
	return nil
}

// tellBodyWriter tells the body writer waiting for a 100 Continue whether to
// send the body; it does nothing when none waits (or it was told already).
func (pc *http1Conn) tellBodyWriter(send bool) {
	if pc.sendBody != nil {
		pc.sendBody <- send // buffered, and sent once
		pc.sendBody = nil
	}
}

// expectsContinue reports whether req asks the upstream for a 100 Continue
// before its body, as http.Request reads Expect.
func expectsContinue(req *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(req.Header["Expect"], "100-continue")
}

// readResponse reads a response head with the HTTP/1.1 codec and builds the
// *http.Response that http.ReadResponse would (newResponse); its body is
// set by roundTrip. A response the codec refuses is a malformedResponseError.
func (pc *http1Conn) readResponse(req *http.Request) (*http.Response, error) {
	if err := pc.head.ReadResponse(pc.br, responseLimits); err != nil {
		var refused *http1.Error
		if errors.As(err, &refused) {
			return nil, &malformedResponseError{refused}
		}
		return nil, err
	}
	res := newResponseIn(pc.room, &pc.head, req)
	res.TLS = pc.tlsState
	return res, nil
}

// release ends an exchange: the connection is pooled again if both sides let
// it live and the cancellation hook never ran, closed otherwise.
func (pc *http1Conn) release(keep bool, stop func() bool) {
	if pc.bodySent != nil {
		switch {
		case keep && pc.bodyEOF.Load():
			// The whole body was read: its writer has at most its last
			// flush to make, which the upstream, having answered, takes.
			keep = <-pc.bodySent == nil
		default:
			// The response ended while the request body was still being
			// read (the upstream answered early): the connection cannot be
			// reused, and the writer is not waited for.
			select {
			case err := <-pc.bodySent:
				keep = keep && err == nil
			default:
				keep = false
			}
		}
		pc.bodySent = nil
	}
	if stop() && keep && !pc.sawEOF {
		pc.reused = false
		pc.client.put(pc)
		return
	}
	pc.close()
}

// http1Body is a response body that holds its connection: read to its end
// (trailers included) it returns the connection to the pool, and closed before,
// or failing, it closes it.
type http1Body struct {
	body io.Reader // the connection's BodyReader, or NoBody
	res  *http.Response
	pc   *http1Conn
	ctx  context.Context
	keep bool
	stop func() bool
	// eof: the body was read to its end, and its connection may serve
	// another exchange: nothing is read from it any more.
	eof    bool
	once   sync.Once
	closed atomic.Bool
}

func (b *http1Body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.eof {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if err == nil && b.body == &b.pc.body && b.pc.body.Done() {
		err = io.EOF // the last bytes: release the connection now, as net/http does
	}
	switch {
	case err == io.EOF:
		b.eof = true
		if b.res != nil {
			setTrailer(b.res, &b.pc.body.Trailer)
		}
		b.end(b.keep)
	case err != nil:
		b.end(false)
		if b.ctx.Err() != nil {
			err = context.Cause(b.ctx)
		}
	}
	return n, err
}

// Close before the end closes the connection rather than draining it, as
// http.Transport does.
func (b *http1Body) Close() error {
	b.closed.Store(true)
	b.end(false)
	return nil
}

func (b *http1Body) end(keep bool) {
	b.once.Do(func() {
		if b.pc != nil { // nil: a room's body, forgotten
			b.pc.release(keep, b.stop)
		}
	})
}
