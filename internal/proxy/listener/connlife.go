package listener

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/http1"
	"github.com/portico-dev/portico/internal/proxy/internal/rawsock"
	"github.com/portico-dev/portico/internal/proxy/internal/sockpeek"
)

// An HTTP connection's life follows its connection manager's limits
// (hcm.ConnLimits), as Envoy's does: closed once it has had no request in
// progress for the idle timeout, or once older than the maximum duration while
// idle; drained ("Connection: close" on its responses, which Go's HTTP/2 server
// turns into a GOAWAY) once older than the maximum duration while busy; and, when
// the proxy closes it, kept open for the delayed close timeout until the peer
// closes its side, so that the peer reads what was sent last. The limits are read
// from the connection's chain in the configuration in force at each event.

// connLife is one HTTP connection's limits in force, driven by http.Server's
// ConnState events.
type connLife struct {
	ll     *liveListener
	conn   net.Conn   // as http.Server has it (a *tls.Conn on TLS listeners)
	holder *connChain // the TLS chain chosen at the handshake; nil for plaintext
	start  time.Time

	mu        sync.Mutex
	active    bool
	idleSince time.Time
	timer     *time.Timer
	due       time.Time // when timer fires; zero when it is not armed
	ended     bool
}

type connLifeKey struct{}

// limits are the connection's chain's, in the listener's configuration in force;
// none for a TLS connection before its handshake chose a chain.
func (cl *connLife) limits() hcm.ConnLimits {
	if spec := cl.spec(); spec != nil {
		return spec.Conn
	}
	return hcm.ConnLimits{}
}

// spec is the connection manager of the connection's chain, in the listener's
// configuration in force; nil for a TLS connection before its handshake chose
// a chain.
func (cl *connLife) spec() *hcm.Spec {
	lc := cl.ll.cfg.Load()
	var fc *FilterChain
	if cl.holder != nil {
		fc = holderChain(cl.holder, lc)
	} else {
		fc = lc.Chains[""]
	}
	if fc == nil {
		return nil
	}
	return fc.Spec
}

// draining reports whether a response on the connection must close it: it is
// older than the maximum duration (an HTTP/2 one by the drain time more, during
// which Envoy still takes new streams).
func (cl *connLife) draining(protoMajor int) bool {
	l := cl.limits()
	if l.MaxDuration <= 0 {
		return false
	}
	age := time.Since(cl.start)
	if protoMajor == 2 {
		return age >= l.MaxDuration+l.Drain
	}
	return age >= l.MaxDuration
}

// setState follows http.Server's view of the connection.
func (cl *connLife) setState(state http.ConnState) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	switch state {
	case http.StateActive:
		cl.active = true
	case http.StateNew, http.StateIdle:
		cl.active = false
		cl.idleSince = time.Now()
		cl.schedule(cl.idleSince, cl.limits())
	case http.StateClosed, http.StateHijacked:
		cl.ended = true
		if cl.timer != nil {
			cl.timer.Stop()
		}
	}
}

// schedule arms the timer for when an idle connection may reach a limit; a timer
// already due earlier stays, and check schedules again when it fires. Called
// with mu held, while idle.
func (cl *connLife) schedule(now time.Time, l hcm.ConnLimits) {
	var next time.Time
	if l.Idle > 0 {
		next = cl.idleSince.Add(l.Idle)
	}
	if end := cl.start.Add(l.MaxDuration); l.MaxDuration > 0 && (next.IsZero() || end.Before(next)) {
		next = end
	}
	if next.IsZero() || (!cl.due.IsZero() && !cl.due.After(next)) {
		return
	}
	cl.due = next
	if cl.timer == nil {
		cl.timer = time.AfterFunc(next.Sub(now), cl.check)
		return
	}
	cl.timer.Reset(next.Sub(now))
}

// check closes the connection if it is idle and past a limit, else schedules
// the next look.
func (cl *connLife) check() {
	cl.mu.Lock()
	cl.due = time.Time{}
	if cl.ended || cl.active {
		cl.mu.Unlock()
		return
	}
	now, l := time.Now(), cl.limits()
	expired := (l.Idle > 0 && now.Sub(cl.idleSince) >= l.Idle) || (l.MaxDuration > 0 && now.Sub(cl.start) >= l.MaxDuration)
	if !expired {
		cl.schedule(now, l)
		cl.mu.Unlock()
		return
	}
	cl.ended = true
	cl.mu.Unlock()
	_ = cl.conn.Close()
}

// connLives tracks the HTTP connections of a listener by the net.Conn
// http.Server reports their states with.
type connLives struct{ m sync.Map } // net.Conn -> *connLife

// connContext is http.Server.ConnContext: it starts the connection's life and
// gives it to the requests' context. chain is the TLS chain holder, nil for a
// plaintext connection.
func (ls *connLives) start(ctx context.Context, ll *liveListener, c net.Conn, chain *connChain) context.Context {
	cl := &connLife{ll: ll, conn: c, holder: chain, start: time.Now()}
	if sc := serverConnOf(c); sc != nil {
		sc.life = cl
	}
	ls.m.Store(c, cl)
	return context.WithValue(ctx, connLifeKey{}, cl)
}

// connState is http.Server.ConnState. A connection's life is found on its
// serverConn when start put it there (every request changes the state twice:
// no lookup in m for those), else in m.
func (ls *connLives) connState(c net.Conn, state http.ConnState) {
	if state == http.StateClosed || state == http.StateHijacked {
		if v, ok := ls.m.LoadAndDelete(c); ok {
			v.(*connLife).setState(state)
		}
		return
	}
	if sc := serverConnOf(c); sc != nil && sc.life != nil {
		sc.life.setState(state)
		return
	}
	if v, ok := ls.m.Load(c); ok {
		v.(*connLife).setState(state)
	}
}

// serverConnOf is the serverConn c is, or is over (under TLS, or a connection
// the codec sniffed for h2c); nil: none.
func serverConnOf(c net.Conn) *serverConn {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn()
	}
	sc, _ := c.(*serverConn)
	return sc
}

// headTimeout bounds the read of a request head on the connection whose
// context is ctx: its chain's request_headers_timeout, in the configuration in
// force, or readHeaderTimeout.
func headTimeout(ctx context.Context) time.Duration {
	if cl := lifeOf(ctx); cl != nil {
		if t := cl.limits().Headers; t > 0 {
			return t
		}
	}
	return readHeaderTimeout
}

// streamIdleTimeout is the stream idle timeout of the connection whose
// context is ctx: its chain's stream_idle_timeout, which bounds the codec's
// writes to a client that stops reading.
func streamIdleTimeout(ctx context.Context) time.Duration {
	if cl := lifeOf(ctx); cl != nil {
		if spec := cl.spec(); spec != nil {
			return spec.StreamIdleTimeout
		}
	}
	return 0
}

// lifeOf is the life of the connection a request came on, nil if none.
func lifeOf(ctx context.Context) *connLife {
	cl, _ := ctx.Value(connLifeKey{}).(*connLife)
	return cl
}

// serverConn is an accepted HTTP connection whose close waits for the peer's
// (delayed_close_timeout): it sends its FIN at once, then reads and discards
// until the peer closes or the delay ends, and only then closes the socket, so
// that data still arriving does not make the kernel reset the connection
// before the peer has read the last response.
type serverConn struct {
	net.Conn
	life      *connLife // set by connContext
	closeOnce sync.Once
	// writes, when set (boundH2Writes), bounds every write by the chain's
	// stream idle timeout, or by the longest a stream's route allowed
	// (allowed, in nanoseconds; unbounded once a route disabled it).
	writes    *http1.ConnWriter
	allowed   atomic.Int64
	unbounded atomic.Bool
	// failed: a bounded write failed, and the connection is ending. Later
	// writes go to the socket unbounded (under their own deadlines: the bound
	// would push theirs back by a whole timeout).
	failed atomic.Bool
	// batch gathers the writes of Go's HTTP/2 server (boundH2Writes); its
	// sends are bounded writes.
	batch *writeBatch
}

// Write is the socket's, bounded and batched once boundH2Writes has been
// called.
func (c *serverConn) Write(p []byte) (int, error) {
	if c.batch != nil {
		return c.batch.Write(p)
	}
	return c.boundedWrite(p)
}

// SetWriteDeadline bounds what was written before it (and waits in the
// batch) by the deadline in force, as it was without a batch, and the later
// writes by t: tls.Conn.Close bounds its close_notify so, then ends every
// write with a deadline of now.
func (c *serverConn) SetWriteDeadline(t time.Time) error {
	c.sendWaiting()
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines; the write one as SetWriteDeadline does.
func (c *serverConn) SetDeadline(t time.Time) error {
	c.sendWaiting()
	return c.Conn.SetDeadline(t)
}

// sendWaiting sends what waits in the batch, if the connection has one, in
// the caller's goroutine. A send already underway may be stuck on a client
// that stopped reading, for as long as the bound allows or for ever: its
// deadline becomes lastWritesTimeout from now. tls.Conn.Close comes here
// (its close_notify's deadlines) and, with no write of its own in flight,
// would otherwise wait for that send; it used to find the write in flight and
// close the socket at once. The callers are closing paths once the
// connection serves (Go's HTTP/2 server sets no deadline on it), so the
// deadline may hold for the rest of its life.
func (c *serverConn) sendWaiting() {
	if c.batch == nil {
		return
	}
	if !c.batch.TryFlush() {
		_ = c.writes.SetDeadline(time.Now().Add(lastWritesTimeout))
		_ = c.batch.Flush()
	}
}

// boundedWrite writes p to the socket, bounded once boundH2Writes has been
// called.
func (c *serverConn) boundedWrite(p []byte) (int, error) {
	if c.writes == nil || c.failed.Load() {
		return c.Conn.Write(p)
	}
	var timeout time.Duration
	if spec := c.life.spec(); spec != nil && !c.unbounded.Load() {
		timeout = spec.StreamIdleTimeout // in the configuration in force
		if allowed := time.Duration(c.allowed.Load()); timeout > 0 && allowed > timeout {
			timeout = allowed
		}
	}
	c.writes.SetTimeout(timeout)
	n, err := c.writes.Write(p)
	if err != nil {
		c.failed.Store(true)
	}
	return n, err
}

// AllowIdle is hcm.ConnWriteBound: a stream's route lets its writes make no
// progress for d (its idle_timeout; 0: for ever), which the connection's
// bound then allows for as long as it lives, since the frames of all its
// streams share the socket.
func (c *serverConn) AllowIdle(d time.Duration) {
	if d <= 0 {
		c.unbounded.Store(true)
		return
	}
	for {
		cur := c.allowed.Load()
		if int64(d) <= cur || c.allowed.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// boundH2Writes bounds the writes of a connection Go's HTTP/2 server serves
// by its chain's stream idle timeout, as the HTTP/1.1 codec bounds its own: a
// write that makes no progress for that long fails, and the server closes the
// connection. Go's server bounds a stream's writes while its handler runs
// (the connection manager's idle timer sets the stream's write deadline) but
// not the frames it still has to send after: a client that stops reading
// would hold the connection for ever. (Its own HTTP2Config.WriteByteTimeout
// is one value for the whole server, whose chains each have their own
// timeout.) A route's idle_timeout longer than the chain's, or disabled,
// loosens the bound for the connection (AllowIdle, through the requests'
// context). It is http.Server's ConnContext after start, so it runs before
// the server writes anything.
func boundH2Writes(ctx context.Context, c net.Conn) context.Context {
	if sc := serverConnOf(c); sc != nil && sc.life != nil {
		sc.writes = http1.NewConnWriter(sc.Conn)
		// A failed send closes the socket: the server may have nothing more to
		// write, and learns of the failure when its read fails.
		sc.batch = newWriteBatch(sc.boundedWrite, func(error) { _ = sc.Conn.Close() })
		return context.WithValue(ctx, hcm.ConnWriteBoundKey{}, hcm.ConnWriteBound(sc))
	}
	return ctx
}

func (c *serverConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if c.batch == nil {
			err = c.closeSocket()
			return
		}
		// What waits in the batch (the server's GOAWAY) leaves before the
		// socket closes, from a goroutine: http.Server closes its connections
		// one after another, and must not wait for a client that stopped
		// reading.
		go func() {
			c.sendLast()
			_ = c.closeSocket()
		}()
	})
	return err
}

// closeSocket closes the socket, after the delayed close's wait when the
// connection's chain sets one.
func (c *serverConn) closeSocket() error {
	var delay time.Duration
	if c.life != nil {
		delay = c.life.limits().DelayedClose
	}
	if delay <= 0 {
		return c.Conn.Close()
	}
	_ = closeWrite(c.Conn)
	_ = c.Conn.SetReadDeadline(time.Now().Add(delay))
	go func() {
		_, _ = io.Copy(io.Discard, c.Conn)
		_ = c.Conn.Close()
	}()
	return nil
}

// CloseAsked is http1.AskedCloser: the client asked for the close and is to
// send nothing more, so the connection closes at once, without the delayed
// close's half-close, read and goroutine, unless bytes the client sent all the
// same wait unread in the socket (closing would answer them with a reset).
func (c *serverConn) CloseAsked() error {
	if unreadInput(c.Conn) {
		return c.Close()
	}
	var err error
	c.closeOnce.Do(func() { err = c.Conn.Close() })
	return err
}

// unreadInput reports whether bytes the client sent wait unread in c's
// socket, which closing it would answer with a reset; true when it cannot
// tell.
func unreadInput(c net.Conn) bool {
	if pc, ok := c.(*proxyConn); ok {
		c = pc.Conn // bytes the PROXY protocol reader holds cause no reset
	}
	p := sockpeek.New(c)
	return p == nil || p.Look() == sockpeek.Data
}

// CloseWrite half-closes the connection (net/http's lingering close).
func (c *serverConn) CloseWrite() error {
	c.sendWaiting()
	return closeWrite(c.Conn)
}

// lastWritesTimeout is how long what waits in a batch when the connection
// closes may take to leave: what tls.Conn.Close gives its close_notify.
const lastWritesTimeout = 5 * time.Second

// sendLast sends what waits in the batch, within lastWritesTimeout: a send
// underway to a client that stopped reading, on a connection whose writes a
// route left unbounded, would otherwise hold the close for ever. The deadline
// is the handler's kind, which no write's refresh of the bound moves.
func (c *serverConn) sendLast() {
	_ = c.writes.SetDeadline(time.Now().Add(lastWritesTimeout))
	_ = c.batch.Close()
}

// lifeListener hands a plaintext listener's connections to http.Server as
// serverConns (reading their PROXY protocol header first when configured).
type lifeListener struct {
	net.Listener
	ll *liveListener
}

func (l lifeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &serverConn{Conn: withProxyProtocol(rawsock.Wrap(c), l.ll.cfg.Load())}, nil
}
