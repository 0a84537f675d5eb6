// Package httpserver runs an *http.Server with the lifecycle Portico's small
// servers share: bind an address (port 0 allowed), serve in the background,
// report the bound address, shut down gracefully, or Run until a context
// ends.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultShutdownTimeout bounds the graceful drain in Run when
// Config.ShutdownTimeout is zero.
const DefaultShutdownTimeout = 5 * time.Second

// Config configures a Server.
type Config struct {
	// Name prefixes errors ("admin: listen on ...") and log messages
	// ("admin server listening"). Empty means "httpserver".
	Name string
	// Addr is the TCP address Start binds, e.g. ":9090" or "127.0.0.1:0".
	Addr string
	// NewServer builds the http.Server to run, given the bound address
	// (which differs from Addr when Addr has port 0). It is called once per
	// successful bind, with the Server's lock held, so it must not call
	// the Server's methods. Required.
	NewServer func(boundAddr string) *http.Server
	// OnShutdown, if set, runs once when shutting down a started server
	// begins, concurrently with the drain, e.g. to abort long-running
	// requests. It has returned by the time Shutdown returns.
	OnShutdown func()
	// ShutdownTimeout bounds the graceful drain in Run; zero means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// Logger receives lifecycle messages; nil discards them.
	Logger *slog.Logger
	// Listen opens the listener; nil means net.Listen. Tests use it to inject failures.
	Listen func(network, addr string) (net.Listener, error)
}

// Server runs one http.Server. Create it with New, then Start or Run it.
type Server struct {
	cfg          Config
	log          *slog.Logger
	shutdownOnce sync.Once

	mu       sync.Mutex
	srv      *http.Server
	addr     string
	done     chan struct{} // closed when Serve returns
	serveErr error         // set before done is closed

	// unused holds the connections that have not started a request yet;
	// draining is set once Shutdown begins. See closeUnused.
	connMu   sync.Mutex
	unused   map[net.Conn]struct{}
	draining bool
}

// New returns an unstarted Server for cfg, with defaults filled in.
func New(cfg Config) *Server {
	if cfg.Name == "" {
		cfg.Name = "httpserver"
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log}
}

// Start binds Config.Addr and serves in the background. It returns once the
// socket is bound, so Addr is valid and connections are accepted. A Server
// can be started only once; a failed bind may be retried.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return fmt.Errorf("%s: server already started", s.cfg.Name)
	}
	listen := s.cfg.Listen
	if listen == nil {
		listen = net.Listen
	}
	ln, err := listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %q: %w", s.cfg.Name, s.cfg.Addr, err)
	}
	s.addr = ln.Addr().String()
	s.srv = s.cfg.NewServer(s.addr)
	s.trackUnused(s.srv)
	if s.cfg.OnShutdown != nil {
		s.srv.RegisterOnShutdown(s.runOnShutdown)
	}
	s.done = make(chan struct{})
	s.log.Info(s.cfg.Name+" server listening", "addr", s.addr)
	go s.serve(s.srv, ln, s.done)
	return nil
}

// serve runs srv until it is shut down, recording any unexpected failure.
func (s *Server) serve(srv *http.Server, ln net.Listener, done chan struct{}) {
	defer close(done)
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return
	}
	s.log.Error(s.cfg.Name+" server stopped unexpectedly", "error", err)
	s.mu.Lock()
	s.serveErr = fmt.Errorf("%s: serve: %w", s.cfg.Name, err)
	s.mu.Unlock()
}

// trackUnused records, through srv's ConnState hook, the connections that have
// not started a request, so that Shutdown can close them at once. http.Server
// counts such a connection as busy for its first five seconds: a client that
// dialled a spare connection (Go's Transport does when it races a dial against
// a connection coming back to its pool) would otherwise hold a graceful
// shutdown for five seconds while nothing is in flight.
func (s *Server) trackUnused(srv *http.Server) {
	s.unused = map[net.Conn]struct{}{}
	next := srv.ConnState
	srv.ConnState = func(c net.Conn, state http.ConnState) {
		s.connMu.Lock()
		switch {
		case state == http.StateNew && s.draining:
			_ = c.Close()
		case state == http.StateNew:
			s.unused[c] = struct{}{}
		default:
			delete(s.unused, c)
		}
		s.connMu.Unlock()
		if next != nil {
			next(c, state)
		}
	}
}

// closeUnused closes the connections that have not started a request, and
// any accepted from now on; requests in flight are left to finish.
func (s *Server) closeUnused() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.draining = true
	for c := range s.unused {
		_ = c.Close()
	}
	clear(s.unused)
}

// runOnShutdown calls Config.OnShutdown at most once; concurrent callers
// wait until it has returned.
func (s *Server) runOnShutdown() {
	if s.cfg.OnShutdown != nil {
		s.shutdownOnce.Do(s.cfg.OnShutdown)
	}
}

// Addr returns the bound address (e.g. "127.0.0.1:41234"), or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops accepting connections, runs Config.OnShutdown and waits for
// in-flight requests until ctx is done, after which connections are closed
// forcibly. It returns once Serve has returned. Shutting down an unstarted
// server is a no-op.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	s.closeUnused()
	err := srv.Shutdown(ctx)
	if err != nil {
		// The graceful window expired; don't leave connections behind.
		err = errors.Join(fmt.Errorf("%s: shutdown: %w", s.cfg.Name, err), srv.Close())
	}
	// http.Server runs the hook asynchronously; make sure it has finished.
	s.runOnShutdown()
	<-done
	return err
}

// Run starts the server, serves until ctx is done (or serving fails), then
// shuts down gracefully within Config.ShutdownTimeout. It returns nil after
// a clean, ctx-triggered stop.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(); err != nil {
		return err
	}
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()

	select {
	case <-ctx.Done():
	case <-done:
	}
	// ctx is already done here, so the drain needs its own deadline.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	shutdownErr := s.Shutdown(shutdownCtx)

	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.serveErr, shutdownErr)
}
