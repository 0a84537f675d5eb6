package listener

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/http1"
	"github.com/portico-dev/portico/internal/proxy/internal/sorted"
	"github.com/portico-dev/portico/internal/proxy/internal/stackgrow"
)

const (
	// drainTimeout bounds how long in-flight requests may finish when a
	// listener is removed or the proxy stops.
	drainTimeout = 5 * time.Second

	// readHeaderTimeout bounds a TLS handshake, and the read of an HTTP/1.1
	// request head (from its first byte) whose chain does not set
	// request_headers_timeout: where Envoy leaves it unbounded, a slow client
	// (slowloris) is cut.
	readHeaderTimeout = 30 * time.Second

	// A listener whose address cannot be bound is retried on its own, from
	// bindRetryMin doubling up to bindRetryMax, with one log line per attempt.
	BindRetryMin = 200 * time.Millisecond
	bindRetryMax = 5 * time.Second

	// DefaultBindGrace is how long a listener of the first configuration may fail to
	// bind before Run gives up (Config.BindGrace).
	DefaultBindGrace = 5 * time.Second
)

// liveListener is a bound socket with its HTTP server. It outlives
// configuration swaps: only its configuration pointer changes.
type liveListener struct {
	name     string
	bindAddr string
	tls      bool
	ln       net.Listener
	srv      *http.Server  // HTTP/2
	h1       *http1.Server // HTTP/1.1
	cfg      atomic.Pointer[Config]
	closing  atomic.Bool
	served   chan struct{} // closed when Serve returns
	// conns are the connections a TLS listener serves outside http.Server
	// (waiting for their ClientHello, or TCP-proxied); acceptDone is closed
	// when its accept loop has ended (nil for plaintext listeners).
	conns      connTracker
	acceptDone chan struct{}
	// lives are its HTTP connections' limits (connlife.go).
	lives connLives
}

// unboundListener is a listener of the applied configuration whose socket
// could not be opened yet. The proxy is not ready while one exists.
type unboundListener struct {
	cfg      *Config // the latest configuration, served once bound
	bindAddr string
	backoff  time.Duration // the wait before the attempt at next
	next     time.Time
	since    time.Time // the first failed attempt
	err      error     // the last attempt's
}

// Set is the proxy's listeners: those bound, those waiting for their
// address, and those draining. Its methods are called by the goroutine that
// applies configurations (sync), the one retrying binds (retryBinds), and
// any goroutine asking for addresses.
type Set struct {
	SetConfig

	// ready is set once a first configuration is applied; started once every
	// listener of an applied configuration has been bound.
	ready   atomic.Bool
	started atomic.Bool

	mu        sync.Mutex // guards listeners and unbound (read by addr from any goroutine)
	listeners map[string]*liveListener
	draining  sync.WaitGroup // listeners being shut down after removal from the config

	// unbound holds the listeners of the applied configuration that could not
	// be bound yet (guarded by mu); retryBinds retries them, woken through
	// rebind. unboundCount mirrors its size for Ready.
	unbound      map[string]*unboundListener
	unboundCount atomic.Int32
	rebind       chan struct{}
}

// SetConfig is what a Set is made with.
type SetConfig struct {
	Log       *slog.Logger
	AccessLog *accesslog.Log // tcp_proxy connections' lines
	HCM       *hcm.Env       // the HTTP chains' connection managers
	// BindTo is the address a listener binds, given its name and its own
	// socket address.
	BindTo func(name, address string) string
	// Grace is how long a listener may stay unbound at start-up; negative
	// means for ever.
	Grace time.Duration
	// Changed says the addresses the egress guard protects changed;
	// refresh brings the guard up to date.
	Changed func()
	Refresh func(context.Context)
}

// NewSet returns a Set with no listener.
func NewSet(cfg SetConfig) *Set {
	return &Set{
		SetConfig: cfg,
		listeners: make(map[string]*liveListener),
		unbound:   make(map[string]*unboundListener),
		rebind:    make(chan struct{}, 1),
	}
}

// IsReady reports whether a configuration was applied and every one of its
// listeners is bound.
func (s *Set) IsReady() bool { return s.ready.Load() && s.unboundCount.Load() == 0 }

// MarkReady records that a configuration was applied; it reports whether it
// is the first.
func (s *Set) MarkReady() bool { return !s.ready.Swap(true) }

// UnboundN is the number of listeners waiting for their address.
func (s *Set) UnboundN() int32 { return s.unboundCount.Load() }

// Applied notes, after a configuration was applied, whether its listeners
// are all bound.
func (s *Set) Applied() {
	s.mu.Lock()
	s.noteStarted()
	s.mu.Unlock()
}

// Addr returns the bound address of the named listener, "" if not bound.
func (s *Set) Addr(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ll, ok := s.listeners[name]; ok {
		return ll.ln.Addr().String()
	}
	return ""
}

// HTTPHandler is the HTTP handler of the named bound listener, nil if none
// (benchmarks call it without a connection).
func (s *Set) HTTPHandler(name string) http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ll, ok := s.listeners[name]; ok {
		return ll.srv.Handler
	}
	return nil
}

// RetryBackoff is how long the named unbound listener waits between bind
// attempts now; false when it is not waiting for its address.
func (s *Set) RetryBackoff(name string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.unbound[name]; ok {
		return u.backoff, true
	}
	return 0, false
}

// Addrs lists the listeners' addresses: of those bound, as configured and
// as bound, and of those waiting for theirs.
func (s *Set) Addrs() []string {
	var addrs []string
	s.mu.Lock()
	for _, ll := range s.listeners {
		addrs = append(addrs, ll.bindAddr, ll.ln.Addr().String())
	}
	for _, u := range s.unbound {
		addrs = append(addrs, u.bindAddr)
	}
	s.mu.Unlock()
	return addrs
}

// bindAddress is the address a listener binds: the configured override, or
// the Listener's own socket address (as BindAddress maps it).
func (s *Set) bindAddress(lc *Config) string {
	return s.BindTo(lc.Name, lc.Address)
}

// Sync opens the listeners of configs that are new, closes removed ones, rebinds
// those whose address or TLS-ness changed, and points the rest at their new
// configuration. Unchanged listeners keep their sockets and connections.
// Listeners that cannot be bound are left to retryBinds.
func (s *Set) Sync(serveCtx context.Context, configs map[string]*Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, ll := range s.listeners {
		lc, ok := configs[name]
		if ok && ll.bindAddr == s.bindAddress(lc) && ll.tls == lc.Tls {
			continue
		}
		delete(s.listeners, name)
		s.drain(ll)
		s.Changed()
	}
	for name, u := range s.unbound {
		if lc, ok := configs[name]; !ok || u.bindAddr != s.bindAddress(lc) {
			delete(s.unbound, name)
			s.Changed()
		}
	}
	for _, name := range sorted.Keys(configs) {
		lc := configs[name]
		if ll, ok := s.listeners[name]; ok {
			ll.cfg.Store(lc)
			continue
		}
		if u, ok := s.unbound[name]; ok {
			// Still waiting for its address: retryBinds keeps its backoff, so
			// a burst of updates does not become a burst of bind errors.
			u.cfg = lc
			continue
		}
		ll, err := s.openListener(serveCtx, lc)
		s.Changed()
		if err != nil {
			now := time.Now()
			u := &unboundListener{cfg: lc, bindAddr: s.bindAddress(lc), backoff: BindRetryMin, since: now, err: err}
			u.next = now.Add(u.backoff)
			s.unbound[name] = u
			s.Log.Error("cannot open listener", "listener", name, "address", u.bindAddr, "error", err, "retry_in", u.backoff)
			continue
		}
		s.listeners[name] = ll
	}
	s.unboundCount.Store(int32(len(s.unbound)))
	select {
	case s.rebind <- struct{}{}:
	default:
	}
}

// RetryBinds retries unbound listeners with backoff until ctx is done,
// independently of configuration updates. Until the proxy has been ready once, a
// listener still unbound after the bind grace is a start-up failure: retryBinds
// returns it, so that a port taken by another process ends the program with a
// reason instead of leaving it unready for ever. Later failures (a listener moved
// to a busy address) are retried without end, since traffic is already flowing.
func (s *Set) RetryBinds(ctx context.Context) error {
	timer := time.NewTimer(bindRetryMax)
	defer timer.Stop()
	for {
		wait, pending, err := s.bindDue(ctx, time.Now())
		if err != nil {
			return err
		}
		s.Refresh(ctx) // a listener bound late, at a port it only now knows
		if pending {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.rebind:
		case <-timer.C:
		}
	}
}

// bindDue attempts the binds that are due and returns how long until the
// next one, if any listener remains unbound, or the start-up failure that ends
// the proxy.
func (s *Set) bindDue(ctx context.Context, now time.Time) (time.Duration, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unbound) == 0 {
		s.noteStarted()
		return 0, false, nil
	}
	grace, starting := s.Grace, !s.started.Load()
	var next time.Time
	for _, name := range sorted.Keys(s.unbound) {
		u := s.unbound[name]
		deadline := u.since.Add(grace)
		if !now.Before(u.next) || (starting && grace >= 0 && !now.Before(deadline)) {
			ll, err := s.openListener(ctx, u.cfg)
			if err == nil {
				s.Changed()
				delete(s.unbound, name)
				s.listeners[name] = ll
				continue
			}
			u.err = err
			if starting && grace >= 0 && !now.Before(deadline) {
				return 0, false, fmt.Errorf("cannot listen on %s (listener %s) after trying for %s: %w", u.bindAddr, name, now.Sub(u.since).Round(time.Millisecond), err)
			}
			u.backoff = min(2*u.backoff, bindRetryMax)
			u.next = now.Add(u.backoff)
			s.Log.Error("cannot open listener", "listener", name, "address", u.bindAddr, "error", err, "retry_in", u.backoff)
		}
		due := u.next
		if starting && grace >= 0 && deadline.Before(due) {
			due = deadline
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	s.unboundCount.Store(int32(len(s.unbound)))
	if len(s.unbound) == 0 {
		if s.ready.Load() {
			s.Log.Info("every listener bound; ready")
		}
		s.noteStarted()
		return 0, false, nil
	}
	return next.Sub(now), true, nil
}

// noteStarted records that every listener of an applied configuration has been
// bound once: from then on bind failures are retried without end.
func (s *Set) noteStarted() {
	if s.ready.Load() && len(s.unbound) == 0 {
		s.started.Store(true)
	}
}

func (s *Set) openListener(serveCtx context.Context, lc *Config) (*liveListener, error) {
	addr := s.bindAddress(lc)
	// No TCP keep-alive on accepted connections, as Envoy's listeners (which
	// set it only through socket options, refused here): the idle timeouts
	// end a connection whose client vanished. Go's default, probes after 15
	// s, cost four setsockopt calls per connection accepted.
	lcfg := net.ListenConfig{KeepAlive: -1}
	ln, err := lcfg.Listen(context.Background(), "tcp", addr) // as net.Listen: a bind retried at shutdown still binds
	if err != nil {
		return nil, err
	}
	ll := &liveListener{name: lc.Name, bindAddr: addr, tls: lc.Tls, ln: ln, served: make(chan struct{})}
	ll.cfg.Store(lc)

	// Requests must survive the cancellation of the ADS stream or of Run's
	// context: they are drained explicitly instead.
	baseCtx := context.WithoutCancel(serveCtx)
	handler := &listenerHTTP{hcm: s.HCM.NewHandler(ll.name), ll: ll}
	protocols := new(http.Protocols)
	ll.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		// No IdleTimeout: each connection's chain's idle timeout applies (connLife).
		ConnState:      ll.lives.connState,
		MaxHeaderBytes: headerReadLimit(lc),
		ErrorLog:       slog.NewLogLogger(s.Log.Handler(), slog.LevelDebug),
		BaseContext:    func(net.Listener) context.Context { return baseCtx },
		Protocols:      protocols,
		// OPTIONS * goes to the connection manager, which answers it as Envoy
		// does (no route: 404), not Go's server.
		DisableGeneralOptionsHandler: true,
	}
	ll.h1 = &http1.Server{
		Handler: handler,
		// ServerContextKey makes ReverseProxy abort (not end cleanly) a
		// response whose upstream body failed, as under http.Server.
		BaseContext:       context.WithValue(baseCtx, http.ServerContextKey, ll.srv),
		ConnState:         ll.lives.connState,
		ReadHeaderTimeout: readHeaderTimeout,
		HeadTimeout:       headTimeout,       // the chain's request_headers_timeout
		StreamIdleTimeout: streamIdleTimeout, // the chain's stream_idle_timeout
		Limits:            http1.Limits{MaxHeadBytes: headerReadLimit(lc)},
		Log:               s.Log,
		Refused:           s.HCM.CodecRefused,
	}
	var inner net.Listener
	var failed func(net.Conn)
	if lc.Tls {
		// HTTP/1.1 is served by ll.h1, so http.Server only sees connections
		// that negotiated h2; it keeps HTTP1 on to accept TLS connections.
		protocols.SetHTTP1(true)
		protocols.SetHTTP2(true)
		tl := newTLSListener(s, ll, ln)
		ll.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			return boundH2Writes(tl.connContext(ctx, c), c)
		}
		ll.h1.ConnContext = tl.connContext
		ll.acceptDone = tl.acceptDone
		inner, failed = tl, func(c net.Conn) { tl.pending.Delete(c) }
	} else {
		// Only h2c with prior knowledge reaches http.Server.
		protocols.SetUnencryptedHTTP2(true)
		start := func(ctx context.Context, c net.Conn) context.Context {
			return ll.lives.start(ctx, ll, c, nil)
		}
		ll.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			return boundH2Writes(start(ctx, c), c)
		}
		ll.h1.ConnContext = start
		inner = lifeListener{Listener: ln, ll: ll}
	}
	serveLn := newCodecListener(inner, ll.h1, failed, func(msg string, args ...any) {
		s.Log.Debug(msg, append([]any{"listener", ll.name}, args...)...)
	})
	go func() {
		defer close(ll.served)
		err := ll.srv.Serve(serveLn)
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !ll.closing.Load() {
			s.Log.Error("listener stopped", "listener", ll.name, "error", err)
		}
	}()
	s.Log.Info("listening", "listener", lc.Name, "address", ln.Addr().String(), "tls", lc.Tls)
	return ll, nil
}

// drain stops accepting at once (so the address can be rebound immediately)
// and lets in-flight requests finish for up to drainTimeout.
func (s *Set) drain(ll *liveListener) {
	ll.closing.Store(true)
	_ = ll.ln.Close()
	s.Log.Info("draining listener", "listener", ll.name, "address", ll.bindAddr)
	s.draining.Add(1)
	go func() {
		defer s.draining.Done()
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := ll.h1.Shutdown(ctx); err != nil {
				ll.h1.Close()
			}
		})
		if err := ll.srv.Shutdown(ctx); err != nil {
			_ = ll.srv.Close()
		}
		wg.Wait()
		ll.conns.drain(ctx) // TCP-proxied connections get the rest of the drain time
		<-ll.served
		if ll.acceptDone != nil {
			<-ll.acceptDone
		}
	}()
}

// Shutdown drains every listener and waits for all drains to finish. A proxy
// shutting down is not ready, so that load balancers stop sending it traffic.
func (s *Set) Shutdown() {
	s.ready.Store(false)
	s.mu.Lock()
	for name, ll := range s.listeners {
		delete(s.listeners, name)
		s.drain(ll)
	}
	clear(s.unbound)
	s.unboundCount.Store(0)
	s.mu.Unlock()
	s.draining.Wait()
}

// headerReadLimit is the http.Server's MaxHeaderBytes for a listener: how
// much of a request head net/http reads (and then answers 431 itself) before
// the handler applies the HCM's limits exactly. It is at least Go's default
// (1 MiB) and twice the largest limit of the listener's chains, so that a
// request within its HCM's limit always reaches the handler, whatever the
// per-line overhead of HTTP/1.1 or the per-field overhead of HTTP/2 adds.
// A listener keeps the value it was opened with: a limit raised later above
// half of it is enforced at it until the listener is opened again.
func headerReadLimit(lc *Config) int {
	n := http.DefaultMaxHeaderBytes
	for _, fc := range lc.Chains {
		if fc.Spec != nil { // tcp_proxy chains have none
			n = max(n, 2*fc.Spec.MaxRequestHeaderBytes)
		}
	}
	return n
}

// listenerHTTP hands a listener's HTTP requests to its connection manager,
// with the chain they came in on in the configuration in force: one
// configuration for the whole request, whatever swaps happen meanwhile.
type listenerHTTP struct {
	hcm *hcm.Handler
	ll  *liveListener
}

func (h *listenerHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 {
		// Go's HTTP/2 server runs each stream on a goroutine of its own; an
		// HTTP/1.1 connection's goroutine has grown its stack already (ServeConn).
		stackgrow.Reserve()
	}
	start := time.Now()
	lc := h.ll.cfg.Load()
	chain := lc.Chains[""]
	if lc.Tls {
		chain = chainForRequest(r.Context(), lc)
	}
	if chain == nil {
		// Unreachable: plaintext listeners always have a chain, and TLS
		// handshakes fail without one.
		http.Error(w, "no filter chain", http.StatusMisdirectedRequest)
		return
	}
	if cl := lifeOf(r.Context()); cl != nil && cl.draining(r.ProtoMajor) {
		w.Header().Set("Connection", "close") // net/http closes after it; HTTP/2: GOAWAY
	}
	h.hcm.Serve(w, r, start, &lc.Listener, &chain.Chain)
}
