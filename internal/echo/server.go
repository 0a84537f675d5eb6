// Package echo implements the test backend behind `portico echo`: an HTTP/1.1
// and h2c server that answers every request with a JSON description of what
// it received, so end-to-end tests can see exactly what the proxy forwarded.
package echo

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

// DefaultNamespace is used when Config.Namespace is empty.
const DefaultNamespace = "default"

const (
	// readHeaderTimeout bounds slow-loris style clients; tests never need
	// more than a fraction of it.
	readHeaderTimeout = 10 * time.Second
	// runShutdownTimeout bounds the graceful drain in Run. Delayed requests
	// are aborted on shutdown, so draining is normally immediate.
	runShutdownTimeout = 5 * time.Second
)

// errShuttingDown is the cancellation cause seen by in-flight requests when
// the server stops, so a delayed request can say why it was cut short.
var errShuttingDown = errors.New("echo server shutting down")

// Config configures a Server.
type Config struct {
	// Listen is the TCP address to bind, e.g. "127.0.0.1:9001" or ":0".
	Listen string
	// Service is reported in every response. It is not validated here;
	// the CLI requires it.
	Service string
	// Namespace is reported in every response; empty means "default".
	Namespace string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Server is an echo server. Create it with New, then Start or Run it.
type Server struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	srv      *http.Server
	addr     string
	cancel   context.CancelCauseFunc
	done     chan struct{} // closed when Serve returns
	serveErr error         // set before done is closed
}

// New returns an unstarted Server for cfg, with defaults filled in.
func New(cfg Config) *Server {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log.With("component", "echo", "service", cfg.Service)}
}

// Start binds the listen address and serves in the background. It returns
// once the socket is bound, so Addr is valid and connections are accepted.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("echo: server already started")
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("echo: listen on %q: %w", s.cfg.Listen, err)
	}
	s.addr = ln.Addr().String()
	s.srv = s.newHTTPServer()
	s.done = make(chan struct{})
	s.log.Info("echo server listening", "addr", s.addr, "namespace", s.cfg.Namespace)
	go s.serve(s.srv, ln, s.done)
	return nil
}

// newHTTPServer builds the http.Server; the endpoint reported in responses
// is the bound address, which is only known after listening.
func (s *Server) newHTTPServer() *http.Server {
	// Every request context derives from base, so cancelling it on shutdown
	// aborts X-Echo-Delay waits instead of holding the drain for up to a minute.
	base, cancel := context.WithCancelCause(context.Background())
	s.cancel = cancel

	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	srv := &http.Server{
		Handler: &handler{
			service:   s.cfg.Service,
			namespace: s.cfg.Namespace,
			endpoint:  s.addr,
			log:       s.log,
		},
		Protocols:         &protos,
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(func() { cancel(errShuttingDown) })
	return srv
}

// serve runs srv until it is shut down, recording any unexpected failure.
func (s *Server) serve(srv *http.Server, ln net.Listener, done chan struct{}) {
	defer close(done)
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return
	}
	s.log.Error("echo server stopped unexpectedly", "error", err)
	s.mu.Lock()
	s.serveErr = fmt.Errorf("echo: serve: %w", err)
	s.mu.Unlock()
}

// Addr returns the bound address (e.g. "127.0.0.1:41234"), or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops accepting connections, aborts delayed requests and waits for
// in-flight ones until ctx is done, after which connections are closed
// forcibly. Shutting down an unstarted server is a no-op.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, done, cancel := s.srv, s.done, s.cancel
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		// The graceful window expired; don't leave connections behind.
		err = errors.Join(fmt.Errorf("echo: shutdown: %w", err), srv.Close())
	}
	cancel(errShuttingDown) // release the base context even if no hook ran
	<-done
	return err
}

// Run starts the server, serves until ctx is done (or serving fails), then
// shuts down gracefully. It returns nil after a clean, ctx-triggered stop.
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
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runShutdownTimeout)
	defer cancel()
	shutdownErr := s.Shutdown(shutdownCtx)

	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.serveErr, shutdownErr)
}
