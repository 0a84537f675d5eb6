// Package echo implements the test backend behind `portico echo`: an HTTP/1.1
// and h2c server (or, with a certificate, an HTTPS server speaking h2 and
// HTTP/1.1 by ALPN) that answers every request with a JSON description of
// what it received, so end-to-end tests can see exactly what the proxy
// forwarded, and over which protocol.
package echo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/portico-dev/portico/internal/httpserver"
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
	// TLSCertFile and TLSKeyFile (PEM), when both are set, make the server
	// serve TLS, with h2 and HTTP/1.1 negotiated by ALPN; without them it
	// serves HTTP/1.1 and h2c (HTTP/2 with prior knowledge). They are read
	// by Start.
	TLSCertFile string
	TLSKeyFile  string
}

// tls reports whether the server serves TLS.
func (c Config) tls() bool { return c.TLSCertFile != "" || c.TLSKeyFile != "" }

// Server is an echo server. Create it with New, then Start or Run it.
type Server struct {
	cfg Config
	log *slog.Logger
	hs  *httpserver.Server
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
	s := &Server{cfg: cfg, log: log.With("component", "echo", "service", cfg.Service)}
	// Every request context derives from base, so cancelling it on shutdown
	// aborts X-Echo-Delay waits instead of holding the drain for up to a minute.
	base, cancel := context.WithCancelCause(context.Background())
	s.hs = httpserver.New(httpserver.Config{
		Name: "echo",
		Addr: cfg.Listen,
		NewServer: func(addr string) *http.Server {
			return s.newHTTPServer(addr, base)
		},
		OnShutdown:      func() { cancel(errShuttingDown) },
		ShutdownTimeout: runShutdownTimeout,
		Logger:          s.log.With("namespace", cfg.Namespace),
		Listen:          s.listen,
	})
	return s
}

// listen opens the socket, with TLS when a certificate is configured.
func (s *Server) listen(network, addr string) (net.Listener, error) {
	var tlsConfig *tls.Config
	if s.cfg.tls() {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	}
	ln, err := net.Listen(network, addr)
	if err != nil || tlsConfig == nil {
		return ln, err
	}
	return tls.NewListener(ln, tlsConfig), nil
}

// newHTTPServer builds the http.Server; the endpoint reported in responses
// is the bound address, which is only known after listening.
func (s *Server) newHTTPServer(addr string, base context.Context) *http.Server {
	var protos http.Protocols
	protos.SetHTTP1(true)
	if s.cfg.tls() {
		protos.SetHTTP2(true) // h2 by ALPN
	} else {
		protos.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	}
	return &http.Server{
		Handler: &handler{
			service:   s.cfg.Service,
			namespace: s.cfg.Namespace,
			endpoint:  addr,
			log:       s.log,
		},
		Protocols:         &protos,
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Start binds the listen address and serves in the background. It returns
// once the socket is bound, so Addr is valid and connections are accepted.
func (s *Server) Start() error { return s.hs.Start() }

// Addr returns the bound address (e.g. "127.0.0.1:41234"), or "" before Start.
func (s *Server) Addr() string { return s.hs.Addr() }

// Shutdown stops accepting connections, aborts delayed requests and waits for
// in-flight ones until ctx is done, after which connections are closed
// forcibly. Shutting down an unstarted server is a no-op.
func (s *Server) Shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }

// Run starts the server, serves until ctx is done (or serving fails), then
// shuts down gracefully. It returns nil after a clean, ctx-triggered stop.
func (s *Server) Run(ctx context.Context) error { return s.hs.Run(ctx) }
