package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/portico-dev/portico/internal/httpserver"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is the TCP address to serve HTTPS on, e.g. ":9443" or "127.0.0.1:0".
	Addr string
	// CertDir holds tls.crt and tls.key, read again when they change. Either it or
	// GetCertificate is set.
	CertDir string
	// GetCertificate, when set instead of CertDir, supplies the serving certificate
	// of each handshake (the controller's own, managed in Secrets: internal/managedtls).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Handler answers the admission requests on Path.
	Handler http.Handler
	// Logger receives lifecycle and certificate messages; nil discards them.
	Logger *slog.Logger
}

// Server serves the webhook over TLS.
type Server struct {
	hs *httpserver.Server
}

// NewServer checks cfg and returns an unstarted Server. CertDir must exist; its files
// may appear later (a Secret volume marked optional is empty until the Secret is
// created): until then handshakes fail, and a warning says why.
func NewServer(cfg ServerConfig) (*Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	getCertificate := cfg.GetCertificate
	if getCertificate == nil {
		if cfg.CertDir == "" {
			return nil, fmt.Errorf("no certificate directory: set --webhook-cert-dir to a directory holding %s and %s, or --managed-certificates", CertFile, KeyFile)
		}
		if fi, err := os.Stat(cfg.CertDir); err != nil {
			return nil, fmt.Errorf("certificate directory: %w", err)
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("certificate directory %s is not a directory", cfg.CertDir)
		}
		cert := newCertificate(cfg.CertDir, log)
		_, _ = cert.GetCertificate(nil) // load now, or warn now
		getCertificate = cert.GetCertificate
	}
	tlsConfig := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	mux := http.NewServeMux()
	mux.Handle(Path, cfg.Handler)
	hs := httpserver.New(httpserver.Config{
		Name: "webhook",
		Addr: cfg.Addr,
		NewServer: func(string) *http.Server {
			return &http.Server{
				Handler:           mux,
				ReadHeaderTimeout: 5 * time.Second,
				ReadTimeout:       15 * time.Second,
				WriteTimeout:      15 * time.Second,
				IdleTimeout:       2 * time.Minute,
				// Failed handshakes (no certificate yet, scanners) are not worth more.
				ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
			}
		},
		Listen: func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			return tls.NewListener(ln, tlsConfig), nil
		},
		Logger: log,
	})
	return &Server{hs: hs}, nil
}

// Start binds the address and serves in the background.
func (s *Server) Start() error { return s.hs.Start() }

// Run serves until ctx is done, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error { return s.hs.Run(ctx) }

// Addr is the bound address, or "" before Start.
func (s *Server) Addr() string { return s.hs.Addr() }

// Shutdown stops a started server.
func (s *Server) Shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }
