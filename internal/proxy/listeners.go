package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/portico-dev/portico/internal/proxy/hcm"
)

const (
	// drainTimeout bounds how long in-flight requests may finish when a
	// listener is removed or the proxy stops.
	drainTimeout = 5 * time.Second

	readHeaderTimeout = 30 * time.Second
	idleTimeout       = 5 * time.Minute

	// A listener whose address cannot be bound is retried on its own, from
	// bindRetryMin doubling up to bindRetryMax, with one log line per attempt.
	bindRetryMin = 200 * time.Millisecond
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
	srv      *http.Server
	cfg      atomic.Pointer[listenerConfig]
	closing  atomic.Bool
	served   chan struct{} // closed when Serve returns
	// conns are the connections a TLS listener serves outside http.Server
	// (waiting for their ClientHello, or TCP-proxied); acceptDone is closed
	// when its accept loop has ended (nil for plaintext listeners).
	conns      connTracker
	acceptDone chan struct{}
}

// unboundListener is a listener of the applied configuration whose socket
// could not be opened yet. The proxy is not ready while one exists.
type unboundListener struct {
	cfg      *listenerConfig // the latest configuration, served once bound
	bindAddr string
	backoff  time.Duration // the wait before the attempt at next
	next     time.Time
	since    time.Time // the first failed attempt
	err      error     // the last attempt's
}

// bindAddress is the address a listener binds: the configured override, or
// the Listener's own socket address (as BindAddress maps it).
func (p *Proxy) bindAddress(lc *listenerConfig) string {
	if a, ok := p.cfg.ListenerAddrs[lc.name]; ok {
		return a
	}
	if p.cfg.BindAddress != nil {
		return p.cfg.BindAddress(lc.name, lc.address)
	}
	return lc.address
}

// syncListeners opens listeners new in snap, closes removed ones, rebinds
// those whose address or TLS-ness changed, and points the rest at their new
// configuration. Unchanged listeners keep their sockets and connections.
// Listeners that cannot be bound are left to retryBinds.
func (p *Proxy) syncListeners(serveCtx context.Context, snap *snapshot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, ll := range p.listeners {
		lc, ok := snap.listeners[name]
		if ok && ll.bindAddr == p.bindAddress(lc) && ll.tls == lc.tls {
			continue
		}
		delete(p.listeners, name)
		p.drain(ll)
		p.egressStale.Store(true)
	}
	for name, u := range p.unbound {
		if lc, ok := snap.listeners[name]; !ok || u.bindAddr != p.bindAddress(lc) {
			delete(p.unbound, name)
			p.egressStale.Store(true)
		}
	}
	for _, name := range sortedKeys(snap.listeners) {
		lc := snap.listeners[name]
		if ll, ok := p.listeners[name]; ok {
			ll.cfg.Store(lc)
			continue
		}
		if u, ok := p.unbound[name]; ok {
			// Still waiting for its address: retryBinds keeps its backoff, so
			// a burst of updates does not become a burst of bind errors.
			u.cfg = lc
			continue
		}
		ll, err := p.openListener(serveCtx, lc)
		p.egressStale.Store(true)
		if err != nil {
			now := time.Now()
			u := &unboundListener{cfg: lc, bindAddr: p.bindAddress(lc), backoff: bindRetryMin, since: now, err: err}
			u.next = now.Add(u.backoff)
			p.unbound[name] = u
			p.log.Error("cannot open listener", "listener", name, "address", u.bindAddr, "error", err, "retry_in", u.backoff)
			continue
		}
		p.listeners[name] = ll
	}
	p.unboundCount.Store(int32(len(p.unbound)))
	select {
	case p.rebind <- struct{}{}:
	default:
	}
}

// retryBinds retries unbound listeners with backoff until ctx is done,
// independently of configuration updates. Until the proxy has been ready once, a
// listener still unbound after the bind grace is a start-up failure: retryBinds
// returns it, so that a port taken by another process ends the program with a
// reason instead of leaving it unready for ever. Later failures (a listener moved
// to a busy address) are retried without end, since traffic is already flowing.
func (p *Proxy) retryBinds(ctx context.Context) error {
	timer := time.NewTimer(bindRetryMax)
	defer timer.Stop()
	for {
		wait, pending, err := p.bindDue(ctx, time.Now())
		if err != nil {
			return err
		}
		p.refreshEgress(ctx) // a listener bound late, at a port it only now knows
		if pending {
			timer.Reset(wait)
		} else {
			timer.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.rebind:
		case <-timer.C:
		}
	}
}

// bindGrace is how long a listener may stay unbound at start-up; negative means
// for ever.
func (p *Proxy) bindGrace() time.Duration {
	if p.cfg.BindGrace == 0 {
		return DefaultBindGrace
	}
	return p.cfg.BindGrace
}

// bindDue attempts the binds that are due and returns how long until the
// next one, if any listener remains unbound, or the start-up failure that ends
// the proxy.
func (p *Proxy) bindDue(ctx context.Context, now time.Time) (time.Duration, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.unbound) == 0 {
		p.noteStarted()
		return 0, false, nil
	}
	grace, starting := p.bindGrace(), !p.started.Load()
	var next time.Time
	for _, name := range sortedKeys(p.unbound) {
		u := p.unbound[name]
		deadline := u.since.Add(grace)
		if !now.Before(u.next) || (starting && grace >= 0 && !now.Before(deadline)) {
			ll, err := p.openListener(ctx, u.cfg)
			if err == nil {
				p.egressStale.Store(true)
				delete(p.unbound, name)
				p.listeners[name] = ll
				continue
			}
			u.err = err
			if starting && grace >= 0 && !now.Before(deadline) {
				return 0, false, fmt.Errorf("cannot listen on %s (listener %s) after trying for %s: %w", u.bindAddr, name, now.Sub(u.since).Round(time.Millisecond), err)
			}
			u.backoff = min(2*u.backoff, bindRetryMax)
			u.next = now.Add(u.backoff)
			p.log.Error("cannot open listener", "listener", name, "address", u.bindAddr, "error", err, "retry_in", u.backoff)
		}
		due := u.next
		if starting && grace >= 0 && deadline.Before(due) {
			due = deadline
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	p.unboundCount.Store(int32(len(p.unbound)))
	if len(p.unbound) == 0 {
		if p.ready.Load() {
			p.log.Info("every listener bound; ready")
		}
		p.noteStarted()
		return 0, false, nil
	}
	return next.Sub(now), true, nil
}

// noteStarted records that every listener of an applied configuration has been
// bound once: from then on bind failures are retried without end.
func (p *Proxy) noteStarted() {
	if p.ready.Load() && len(p.unbound) == 0 {
		p.started.Store(true)
	}
}

func (p *Proxy) openListener(serveCtx context.Context, lc *listenerConfig) (*liveListener, error) {
	addr := p.bindAddress(lc)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ll := &liveListener{name: lc.name, bindAddr: addr, tls: lc.tls, ln: ln, served: make(chan struct{})}
	ll.cfg.Store(lc)

	// Requests must survive the cancellation of the ADS stream or of Run's
	// context: they are drained explicitly instead.
	baseCtx := context.WithoutCancel(serveCtx)
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	ll.srv = &http.Server{
		Handler:           &listenerHTTP{hcm: p.hcm.NewHandler(ll.name), ll: ll},
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    headerReadLimit(lc),
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		Protocols:         protocols,
	}
	serveLn := ln
	if lc.tls {
		protocols.SetHTTP2(true) // negotiated by ALPN
		tl := newTLSListener(p, ll, ln)
		ll.srv.ConnContext = tl.connContext
		ll.acceptDone = tl.acceptDone
		serveLn = tl
	} else {
		protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	}
	go func() {
		defer close(ll.served)
		err := ll.srv.Serve(serveLn)
		if err != nil && !errors.Is(err, http.ErrServerClosed) && !ll.closing.Load() {
			p.log.Error("listener stopped", "listener", ll.name, "error", err)
		}
	}()
	p.log.Info("listening", "listener", lc.name, "address", ln.Addr().String(), "tls", lc.tls)
	return ll, nil
}

// drain stops accepting at once (so the address can be rebound immediately)
// and lets in-flight requests finish for up to drainTimeout.
func (p *Proxy) drain(ll *liveListener) {
	ll.closing.Store(true)
	_ = ll.ln.Close()
	p.log.Info("draining listener", "listener", ll.name, "address", ll.bindAddr)
	p.draining.Add(1)
	go func() {
		defer p.draining.Done()
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if err := ll.srv.Shutdown(ctx); err != nil {
			_ = ll.srv.Close()
		}
		ll.conns.drain(ctx) // TCP-proxied connections get the rest of the drain time
		<-ll.served
		if ll.acceptDone != nil {
			<-ll.acceptDone
		}
	}()
}

// shutdown drains every listener and waits for all drains to finish. A proxy
// shutting down is not ready, so that load balancers stop sending it traffic.
func (p *Proxy) shutdown() {
	p.ready.Store(false)
	p.mu.Lock()
	for name, ll := range p.listeners {
		delete(p.listeners, name)
		p.drain(ll)
	}
	clear(p.unbound)
	p.unboundCount.Store(0)
	p.mu.Unlock()
	p.draining.Wait()
	p.upstreams.shutdown()
}

// headerReadLimit is the http.Server's MaxHeaderBytes for a listener: how
// much of a request head net/http reads (and then answers 431 itself) before
// the handler applies the HCM's limits exactly. It is at least Go's default
// (1 MiB) and twice the largest limit of the listener's chains, so that a
// request within its HCM's limit always reaches the handler, whatever the
// per-line overhead of HTTP/1.1 or the per-field overhead of HTTP/2 adds.
// A listener keeps the value it was opened with: a limit raised later above
// half of it is enforced at it until the listener is opened again.
func headerReadLimit(lc *listenerConfig) int {
	n := http.DefaultMaxHeaderBytes
	for _, fc := range lc.chains {
		if fc.Hcm != nil { // tcp_proxy chains have none
			n = max(n, 2*fc.Hcm.MaxRequestHeaderBytes)
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
	start := time.Now()
	lc := h.ll.cfg.Load()
	chain := lc.chains[""]
	if lc.tls {
		chain = chainForRequest(r.Context(), lc)
	}
	if chain == nil {
		// Unreachable: plaintext listeners always have a chain, and TLS
		// handshakes fail without one.
		http.Error(w, "no filter chain", http.StatusMisdirectedRequest)
		return
	}
	h.hcm.Serve(w, r, start, &lc.Listener, &chain.Chain)
}
