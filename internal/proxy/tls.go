package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// convertSecret accepts tls_certificate secrets with inline PEM, and parses the
// key pair now so that a broken certificate is NACKed rather than failing
// handshakes later.
func convertSecret(s *tlsv3.Secret) (*tls.Certificate, error) {
	tc := s.GetTlsCertificate()
	if tc == nil {
		return nil, fmt.Errorf("secret type %T is not supported (only tls_certificate)", s.GetType())
	}
	cert, err := convertTLSCertificate(tc)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

func convertTLSCertificate(tc *tlsv3.TlsCertificate) (tls.Certificate, error) {
	if err := unsupported(
		field{"pkcs12", tc.GetPkcs12() != nil},
		field{"watched_directory", tc.GetWatchedDirectory() != nil},
		field{"private_key_provider", tc.GetPrivateKeyProvider() != nil},
		field{"password", tc.GetPassword() != nil},
		field{"tls_params", tc.GetTlsParams() != nil},
	); err != nil {
		return tls.Certificate{}, err
	}
	if tc.GetCertificateChain() == nil || tc.GetPrivateKey() == nil {
		return tls.Certificate{}, errors.New("certificate_chain and private_key are required")
	}
	chain, err := inlineData(tc.GetCertificateChain())
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate_chain: %w", err)
	}
	key, err := inlineData(tc.GetPrivateKey())
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("private_key: %w", err)
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("invalid key pair: %w", err)
	}
	return cert, nil
}

// newServerTLSConfig builds the per-chain TLS configuration returned from
// GetConfigForClient once the chain is chosen by SNI.
func newServerTLSConfig(spec *tlsSpec, certs []tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: certs,
		NextProtos:   spec.alpn,
		MinVersion:   spec.minVersion,
		MaxVersion:   spec.maxVersion,
	}
}

// selectChain picks a TLS filter chain by SNI as Envoy does: the exact server
// name, then the most specific "*.suffix" (a wildcard covers any number of
// labels at the filter-chain level), then the chain without server_names.
// The second result is the key the chain was found under.
func (lc *listenerConfig) selectChain(sni string) (*filterChain, string) {
	name := strings.TrimSuffix(strings.ToLower(sni), ".")
	if name != "" {
		if c, ok := lc.chains[name]; ok {
			return c, name
		}
		for i := strings.IndexByte(name, '.'); i >= 0; {
			key := "*" + name[i:]
			if c, ok := lc.chains[key]; ok {
				return c, key
			}
			next := strings.IndexByte(name[i+1:], '.')
			if next < 0 {
				break
			}
			i += next + 1
		}
	}
	if c, ok := lc.chains[""]; ok {
		return c, ""
	}
	return nil, ""
}

// connChain remembers which filter chain a TLS connection was accepted by, so
// that all of its requests are routed by that chain's route configuration.
type connChain struct {
	key   string
	chain *filterChain
}

type connChainKey struct{}

// tlsListener wraps a TCP listener and starts a server-side TLS handshake on
// every connection, selecting the filter chain in GetConfigForClient.
// It returns *tls.Conn unchanged so that net/http recognises TLS and
// negotiates HTTP/2 through ALPN.
type tlsListener struct {
	net.Listener
	ll *liveListener
	// pending maps a freshly accepted connection to its chain holder until
	// http.Server.ConnContext (called right after Accept on the same
	// goroutine) moves it into the connection's context.
	pending sync.Map // *tls.Conn -> *connChain
}

func (l *tlsListener) Accept() (net.Conn, error) {
	raw, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	holder := &connChain{}
	conn := tls.Server(raw, &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			lc := l.ll.cfg.Load()
			chain, key := lc.selectChain(hello.ServerName)
			if chain == nil {
				return nil, fmt.Errorf("no filter chain for server name %q", hello.ServerName)
			}
			holder.key, holder.chain = key, chain
			return chain.tlsConfig, nil
		},
	})
	l.pending.Store(conn, holder)
	return conn, nil
}

// connContext is the http.Server.ConnContext of TLS listeners.
func (l *tlsListener) connContext(ctx context.Context, c net.Conn) context.Context {
	if holder, ok := l.pending.LoadAndDelete(c); ok {
		return context.WithValue(ctx, connChainKey{}, holder.(*connChain))
	}
	return ctx
}

// chainForRequest returns the chain a TLS request is served by: the current
// version of the chain its connection was accepted by, or, if that chain has
// since been removed, the chain as it was at the handshake (the connection
// drains with the configuration it started with).
func chainForRequest(ctx context.Context, lc *listenerConfig) *filterChain {
	holder, ok := ctx.Value(connChainKey{}).(*connChain)
	if !ok || holder.chain == nil {
		return nil
	}
	if c, ok := lc.chains[holder.key]; ok {
		return c
	}
	return holder.chain
}
