package listener

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/rawsock"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// ConvertSecret accepts tls_certificate secrets with inline PEM, and parses the
// key pair now so that a broken certificate is NACKed rather than failing
// handshakes later.
func ConvertSecret(s *tlsv3.Secret) (*tls.Certificate, error) {
	tc := s.GetTlsCertificate()
	if tc == nil {
		return nil, fmt.Errorf("secret type %T is not supported (only tls_certificate)", s.GetType())
	}
	cert, err := ConvertTLSCertificate(tc)
	if err != nil {
		return nil, err
	}
	return &cert, nil
}

// ConvertTLSCertificate converts an inline or SDS tls_certificate.
func ConvertTLSCertificate(tc *tlsv3.TlsCertificate) (tls.Certificate, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("pkcs12", tc.GetPkcs12() != nil),
		xdsconv.Set("watched_directory", tc.GetWatchedDirectory() != nil),
		xdsconv.Set("private_key_provider", tc.GetPrivateKeyProvider() != nil),
		xdsconv.Set("password", tc.GetPassword() != nil),
		xdsconv.Set("tls_params", tc.GetTlsParams() != nil),
	); err != nil {
		return tls.Certificate{}, err
	}
	if tc.GetCertificateChain() == nil || tc.GetPrivateKey() == nil {
		return tls.Certificate{}, errors.New("certificate_chain and private_key are required")
	}
	chain, err := xdsconv.InlineData(tc.GetCertificateChain())
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate_chain: %w", err)
	}
	key, err := xdsconv.InlineData(tc.GetPrivateKey())
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("private_key: %w", err)
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("invalid key pair: %w", err)
	}
	return cert, nil
}

// NewServerTLSConfig builds the per-chain TLS configuration returned from
// GetConfigForClient once the chain is chosen by SNI.
func NewServerTLSConfig(spec *TlsSpec, certs []tls.Certificate) *tls.Config {
	cfg := &tls.Config{
		Certificates: certs,
		NextProtos:   spec.Alpn,
		MinVersion:   spec.MinVersion,
		MaxVersion:   spec.MaxVersion,
		CipherSuites: spec.CipherSuites,
	}
	spec.Clients.apply(cfg)
	return cfg
}

// SelectChain picks a TLS filter chain by SNI as Envoy does: the exact server
// name, then the most specific "*.suffix" (a wildcard covers any number of
// labels at the filter-chain level), then the chain without server_names.
// The second result is the key the chain was found under.
func (lc *Config) SelectChain(sni string) (*FilterChain, string) {
	name := strings.TrimSuffix(strings.ToLower(sni), ".")
	if name != "" {
		if c, ok := lc.Chains[name]; ok {
			return c, name
		}
		for i := strings.IndexByte(name, '.'); i >= 0; {
			key := "*" + name[i:]
			if c, ok := lc.Chains[key]; ok {
				return c, key
			}
			next := strings.IndexByte(name[i+1:], '.')
			if next < 0 {
				break
			}
			i += next + 1
		}
	}
	if c, ok := lc.Chains[""]; ok {
		return c, ""
	}
	return nil, ""
}

// connChain remembers which filter chain a TLS connection was accepted by, so
// that all of its requests are routed by that chain's route configuration.
type connChain struct {
	key   string
	chain *FilterChain
}

type connChainKey struct{}

// tlsListener wraps a TCP listener for the TLS listeners' http.Server: it
// hands it *tls.Conn (server side, handshake pending) so that net/http
// recognises TLS and negotiates HTTP/2 through ALPN, selecting the filter
// chain in GetConfigForClient. When the listener has tcp_proxy chains, every
// connection first waits for its ClientHello (tls_inspector) off the accept
// loop: a tcp_proxy chain then takes it (TLS passed through or terminated),
// an HTTP chain gets it with the ClientHello replayed.
type tlsListener struct {
	net.Listener
	s  *Set
	ll *liveListener
	// pending maps a freshly accepted connection to its chain holder until
	// http.Server.ConnContext (called right after Accept on the same
	// goroutine) moves it into the connection's context.
	pending sync.Map // *tls.Conn -> *connChain

	accepted   chan acceptResult // to Accept, unbuffered
	done       chan struct{}     // closed by Close
	closeOnce  sync.Once
	acceptDone chan struct{} // closed when acceptLoop returns
}

type acceptResult struct {
	c   net.Conn
	err error
}

func newTLSListener(s *Set, ll *liveListener, ln net.Listener) *tlsListener {
	l := &tlsListener{Listener: ln, s: s, ll: ll, accepted: make(chan acceptResult),
		done: make(chan struct{}), acceptDone: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *tlsListener) Accept() (net.Conn, error) {
	select {
	case r := <-l.accepted:
		return r.c, r.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *tlsListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// deliver hands a connection (or an accept error) to Accept; false once the
// listener is closed.
func (l *tlsListener) deliver(r acceptResult) bool {
	select {
	case l.accepted <- r:
		return true
	case <-l.done:
		return false
	}
}

// acceptLoop accepts connections until the socket is closed. Accept errors
// go to http.Server, which backs off on temporary ones (the unbuffered
// channel keeps this loop in step with it).
func (l *tlsListener) acceptLoop() {
	defer close(l.acceptDone)
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			if !l.deliver(acceptResult{err: err}) || errors.Is(err, net.ErrClosed) {
				return
			}
			if te, ok := err.(interface{ Temporary() bool }); !ok || !te.Temporary() {
				return
			}
			continue
		}
		lc := l.ll.cfg.Load()
		if !lc.HasTCP {
			// HTTP only, read and written with raw system calls (TCP
			// proxying splices the socket itself).
			raw = withProxyProtocol(rawsock.Wrap(raw), lc)
			c := l.httpConn(raw)
			if !l.deliver(acceptResult{c: c}) {
				l.pending.Delete(c)
				_ = raw.Close()
			}
			continue
		}
		raw = withProxyProtocol(raw, lc)
		if !l.ll.conns.add(raw) {
			_ = raw.Close()
			continue
		}
		go l.dispatch(raw, lc)
	}
}

// dispatch reads a connection's ClientHello and serves the connection by the
// chain its SNI selects.
func (l *tlsListener) dispatch(raw net.Conn, lc *Config) {
	defer l.ll.conns.done(raw)
	if pc, ok := raw.(*proxyConn); ok {
		// The header first: the ClientHello follows it.
		if pc.readHeader(); pc.err != nil {
			l.s.Log.Debug("no PROXY protocol header", "listener", l.ll.name, "remote", raw.RemoteAddr().String(), "error", pc.err)
			return
		}
	}
	sni, hello, err := peekClientHello(raw, lc.FiltersTimeout)
	if err != nil {
		if !errors.Is(err, errHelloTimeout) || !lc.ContinueOnTimeout {
			l.s.Log.Debug("no TLS ClientHello", "listener", l.ll.name, "remote", raw.RemoteAddr().String(), "error", err)
			_ = raw.Close()
			return
		}
	}
	lc = l.ll.cfg.Load()
	conn := &replayConn{Conn: raw, buf: hello}
	chain, _ := lc.SelectChain(sni)
	switch {
	case chain == nil:
		l.s.Log.Debug("no filter chain for server name", "listener", l.ll.name, "server_name", sni)
		_ = raw.Close()
	case chain.Tcp != nil:
		l.s.serveTCP(lc, chain, conn, sni, &l.ll.conns)
	default:
		c := l.httpConn(conn)
		if !l.deliver(acceptResult{c: c}) {
			l.pending.Delete(c)
			_ = raw.Close()
		}
	}
}

// httpConn starts the server side of TLS on a connection for http.Server;
// the handshake (in the server's connection goroutine) selects the chain.
func (l *tlsListener) httpConn(raw net.Conn) *tls.Conn {
	holder := &connChain{}
	conn := tls.Server(&serverConn{Conn: raw}, &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			lc := l.ll.cfg.Load()
			chain, key := lc.SelectChain(hello.ServerName)
			if chain == nil || chain.Spec == nil {
				return nil, fmt.Errorf("no HTTP filter chain for server name %q", hello.ServerName)
			}
			holder.key, holder.chain = key, chain
			return chain.TlsConfig, nil
		},
	})
	l.pending.Store(conn, holder)
	return conn
}

// errHelloTimeout: no ClientHello within listener_filters_timeout.
var errHelloTimeout = errors.New("timed out waiting for the TLS ClientHello")

// errHelloRead stops the handshake used to read a ClientHello.
var errHelloRead = errors.New("ClientHello read")

// peekClientHello reads a connection's TLS ClientHello, as Envoy's
// tls_inspector does, without answering it, and returns its server name and
// the bytes read (to be replayed). A connection that is not TLS has no server
// name (the default chain serves it); one that sends nothing within timeout
// (0: no limit) fails with errHelloTimeout.
func peekClientHello(raw net.Conn, timeout time.Duration) (string, []byte, error) {
	if timeout > 0 {
		_ = raw.SetReadDeadline(time.Now().Add(timeout))
		defer raw.SetReadDeadline(time.Time{})
	}
	rc := &recordingConn{Conn: raw}
	var sni string
	var gotHello bool
	err := tls.Server(rc, &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			sni, gotHello = hello.ServerName, true
			return nil, errHelloRead
		},
	}).Handshake()
	if gotHello {
		return sni, rc.buf.Bytes(), nil
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "", rc.buf.Bytes(), errHelloTimeout
	case rc.buf.Len() == 0:
		return "", nil, fmt.Errorf("closed before any byte: %w", err)
	}
	return "", rc.buf.Bytes(), nil // not TLS
}

// recordingConn keeps what is read from a connection and writes nothing,
// so that reading a ClientHello leaves no trace on the connection.
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.buf.Write(p[:n])
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) { return 0, errHelloRead }

// replayConn reads buf (a ClientHello already read) before the connection.
type replayConn struct {
	net.Conn
	buf []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.buf) > 0 {
		n := copy(p, c.buf)
		c.buf = c.buf[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the TCP connection (tcp_proxy passes an EOF on).
func (c *replayConn) CloseWrite() error {
	return closeWrite(c.Conn)
}

// connContext is the http.Server.ConnContext of TLS listeners.
func (l *tlsListener) connContext(ctx context.Context, c net.Conn) context.Context {
	v, ok := l.pending.LoadAndDelete(c)
	if !ok {
		return ctx
	}
	holder := v.(*connChain)
	ctx = context.WithValue(ctx, connChainKey{}, holder)
	return l.ll.lives.start(ctx, l.ll, c, holder)
}

// chainForRequest returns the chain a TLS request is served by: the current
// version of the chain its connection was accepted by, or, if that chain has
// since been removed, the chain as it was at the handshake (the connection
// drains with the configuration it started with; so does one whose chain
// became a tcp_proxy chain).
func chainForRequest(ctx context.Context, lc *Config) *FilterChain {
	holder, ok := ctx.Value(connChainKey{}).(*connChain)
	if !ok {
		return nil
	}
	return holderChain(holder, lc)
}

// holderChain is the chain of a TLS connection in lc (see chainForRequest); nil
// before its handshake chose one.
func holderChain(holder *connChain, lc *Config) *FilterChain {
	if holder.chain == nil {
		return nil
	}
	if c, ok := lc.Chains[holder.key]; ok && c.Spec != nil {
		return c
	}
	return holder.chain
}
