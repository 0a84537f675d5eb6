package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/portico-dev/portico/internal/proxy/http1"
)

// HTTP/1.1 connections are served by Portico's own codec (package http1);
// HTTP/2 ones (h2c with prior knowledge, or TLS with ALPN h2) by Go's
// http.Server. codecListener sits between a listener's socket and both: it
// accepts every connection, serves the HTTP/1.1 ones itself, and passes the
// HTTP/2 ones to http.Server through Accept. Both servers hand requests to the
// same listenerHTTP, and so to the same connection manager.
type codecListener struct {
	inner net.Listener // lifeListener or tlsListener
	h1    *http1.Server
	log   func(msg string, args ...any)
	// failed forgets a TLS connection whose handshake failed (it reaches
	// neither server's ConnContext).
	failed func(net.Conn)

	h2        chan net.Conn
	done      chan struct{}
	closeOnce sync.Once
	loopDone  chan struct{} // closed when the accept loop has returned
	acceptErr error         // the error that ended the accept loop
}

// newCodecListener serves inner's connections; failed is nil for a plaintext
// listener, whose h2c connections the HTTP/1.1 server recognises.
func newCodecListener(inner net.Listener, h1 *http1.Server, failed func(net.Conn), log func(string, ...any)) *codecListener {
	l := &codecListener{inner: inner, h1: h1, failed: failed, log: log,
		h2: make(chan net.Conn), done: make(chan struct{}), loopDone: make(chan struct{})}
	if failed == nil {
		h1.H2C = l.toHTTP2
	}
	go l.acceptLoop()
	return l
}

// Accept returns the HTTP/2 connections, for http.Server.
func (l *codecListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.h2:
		return c, nil
	case <-l.loopDone:
		if l.acceptErr != nil {
			return nil, l.acceptErr
		}
		return nil, net.ErrClosed
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *codecListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.inner.Close()
}

func (l *codecListener) Addr() net.Addr { return l.inner.Addr() }

// toHTTP2 hands a connection to http.Server; false once it stopped taking
// them.
func (l *codecListener) toHTTP2(c net.Conn) {
	select {
	case l.h2 <- c:
	case <-l.done:
		_ = c.Close()
	case <-l.loopDone:
		_ = c.Close()
	}
}

func (l *codecListener) acceptLoop() {
	defer close(l.loopDone)
	var backoff time.Duration
	for {
		c, err := l.inner.Accept()
		if err != nil {
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() && !errors.Is(err, net.ErrClosed) {
				// As http.Server does: back off on EMFILE and the like.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(backoff):
					continue
				case <-l.done:
				}
			}
			l.acceptErr = err
			return
		}
		backoff = 0
		if tc, ok := c.(*tls.Conn); ok {
			go l.serveTLS(tc)
			continue
		}
		go l.h1.ServeConn(c, nil)
	}
}

// serveTLS completes the handshake, whose ALPN says which server serves the
// connection (as http.Server would, within its handshake timeout).
func (l *codecListener) serveTLS(c *tls.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), readHeaderTimeout)
	err := c.HandshakeContext(ctx)
	cancel()
	if err != nil {
		l.log("TLS handshake error", "remote", c.RemoteAddr().String(), "error", err)
		l.failed(c)
		_ = c.Close()
		return
	}
	if c.ConnectionState().NegotiatedProtocol == "h2" {
		l.toHTTP2(c)
		return
	}
	l.h1.ServeConn(c, nil)
}
