// Package admin serves Portico's admin endpoint (--admin-addr): liveness
// (/healthz), readiness (/readyz), Prometheus metrics (/metrics) and every object's
// status (/statuses), which probes, scrapers and operators reach from outside; and,
// apart from it and only when asked for (--pprof-addr), Go profiles (/debug/pprof/)
// on a loopback address.
package admin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/portico-dev/portico/internal/httpserver"
)

const (
	// readHeaderTimeout bounds slow clients; probes and scrapers send
	// their headers at once.
	readHeaderTimeout = 5 * time.Second
	// runShutdownTimeout bounds the graceful drain in Run; an in-progress
	// scrape is the longest request this server sees.
	runShutdownTimeout = 5 * time.Second
)

// Config configures a Server.
type Config struct {
	// Addr is the TCP address to bind, e.g. ":9090" or "127.0.0.1:0".
	Addr string
	// Ready reports readiness and, when not ready, what is missing. It is
	// called on every /readyz request, so it must be cheap and safe for
	// concurrent use. Nil means always ready.
	Ready func() (bool, string)
	// Registry is exposed on /metrics. Nil means a fresh NewRegistry(),
	// which is only useful when nothing else needs to register metrics.
	Registry *prometheus.Registry
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
	// Statuses serves GET /statuses, every object's status; nil leaves it out.
	Statuses http.Handler
}

// Server is the admin HTTP server. Create it with New; use Handler directly
// or Start/Run it on Config.Addr.
type Server struct {
	cfg     Config
	log     *slog.Logger
	handler http.Handler
	hs      *httpserver.Server
}

// NewRegistry returns a registry with the Go runtime and process collectors,
// the baseline every Portico process exposes. A private registry (rather than
// prometheus.DefaultRegisterer) keeps tests and multiple servers independent.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// New returns an unstarted Server for cfg, with defaults filled in.
func New(cfg Config) *Server {
	if cfg.Ready == nil {
		cfg.Ready = func() (bool, string) { return true, "" }
	}
	if cfg.Registry == nil {
		cfg.Registry = NewRegistry()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log.With("component", "admin")}
	s.handler = s.routes()
	if IsLoopback(cfg.Addr) {
		s.handler = loopbackHostOnly(s.handler)
	}
	s.hs = httpserver.New(httpserver.Config{
		Name:            "admin",
		Addr:            cfg.Addr,
		NewServer:       s.newHTTPServer,
		ShutdownTimeout: runShutdownTimeout,
		Logger:          s.log,
	})
	return s
}

// newHTTPServer builds the http.Server serving the admin handler.
func (s *Server) newHTTPServer(string) *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Handler returns the admin handler, for tests or for mounting elsewhere.
func (s *Server) Handler() http.Handler { return s.handler }

// routes builds the mux. Method-qualified patterns give GET and HEAD, a 405
// with an Allow header for other methods, and a 404 for unknown paths.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// One failing collector should not blank the whole scrape.
		ErrorHandling: promhttp.ContinueOnError,
		// Counts scrape errors in the same registry, so they are visible.
		Registry: s.cfg.Registry,
	}))
	if s.cfg.Statuses != nil {
		mux.Handle("GET /statuses", s.cfg.Statuses)
	}
	return mux
}

// NewProfiling returns an unstarted server of Go's runtime profiles (/debug/pprof/)
// on addr, which must be a loopback address: profiles show memory contents (request
// data, keys) and a CPU profile costs the process, so they are never served where a
// probe or a scraper could reach them. Contrast New.
func NewProfiling(addr string, logger *slog.Logger) (*Server, error) {
	if err := CheckLoopback(addr); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: Config{Addr: addr}, log: logger.With("component", "pprof")}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	s.handler = loopbackHostOnly(mux)
	s.hs = httpserver.New(httpserver.Config{
		Name:      "pprof",
		Addr:      addr,
		NewServer: s.newHTTPServer,
		// A CPU profile runs for its whole duration; shutting down cuts it short.
		ShutdownTimeout: runShutdownTimeout,
		Logger:          s.log,
	})
	return s, nil
}

// loopbackHostOnly answers 403 to requests whose Host is not a loopback address or
// localhost. A server on loopback is out of the network's reach, but not of a web page
// in the user's browser whose name the page's author makes resolve to 127.0.0.1 (DNS
// rebinding): such a request carries the page's host name, which this refuses.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if loopbackHost(host) {
			next.ServeHTTP(w, r)
			return
		}
		writeText(w, http.StatusForbidden, "this endpoint listens on loopback and answers requests for a loopback address or localhost only")
	})
}

// CheckLoopback refuses an address whose host is not a loopback IP or "localhost".
func CheckLoopback(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("--pprof-addr %q: want HOST:PORT, such as 127.0.0.1:6060 (%v)", addr, err)
	}
	if !IsLoopback(addr) {
		return fmt.Errorf("--pprof-addr %q: profiles are served on a loopback address only, such as 127.0.0.1:6060 (reach them with kubectl port-forward, or ssh)", addr)
	}
	return nil
}

// IsLoopback reports whether addr (HOST:PORT) listens on a loopback address only: its
// host is a loopback IP or localhost (not empty, which is every address).
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && loopbackHost(host)
}

// loopbackHost reports whether host (an IP, bracketed or not, or a name) is a loopback
// IP or localhost.
func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	ip, err := netip.ParseAddr(host)
	return (err == nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost")
}

// healthz answers liveness: if this handler runs, the process is alive.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeText(w, http.StatusOK, "ok")
}

// readyz answers readiness from Config.Ready.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	ready, reason := s.cfg.Ready()
	if ready {
		writeText(w, http.StatusOK, "ready")
		return
	}
	msg := "not ready"
	if reason != "" {
		msg += ": " + reason
	}
	writeText(w, http.StatusServiceUnavailable, msg)
}

// writeText writes a short plain-text body. Probes must never be cached.
func writeText(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body) // a failed write means the prober left
}

// Start binds Config.Addr and serves in the background. It returns once the
// socket is bound, so Addr is valid and connections are accepted.
func (s *Server) Start() error { return s.hs.Start() }

// Addr returns the bound address (e.g. "127.0.0.1:41234"), or "" before Start.
func (s *Server) Addr() string { return s.hs.Addr() }

// Shutdown stops accepting connections and waits for in-flight requests
// until ctx is done, after which connections are closed forcibly. Shutting
// down an unstarted server is a no-op.
func (s *Server) Shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }

// Run starts the server, serves until ctx is done (or serving fails), then
// shuts down gracefully. It returns nil after a clean, ctx-triggered stop.
func (s *Server) Run(ctx context.Context) error { return s.hs.Run(ctx) }
