package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
)

// A response's Connection field names fields that are hop-by-hop (RFC 9110
// section 7.6.1), which the connection manager removes with it. But
// http.Transport removes a Connection field that says close from the
// response it returns (net/http's shouldClose), and with it the only record
// of those names: Connection: close, X-Foo would deliver X-Foo. The codec's
// client removes them itself (dropConnection); for the requests http.Transport
// exchanges (upgrades, Expect, clusters with a transport of their own), its
// HTTP/1.1 connections are namesConns, which note the Connection fields of
// each final response head as it is read, and namesRoundTrip removes what they
// name from the response.

// maxNoted bounds what a namesConn keeps of a response's heads (1xx heads
// included): beyond it the names are not noted, and the fields they name pass
// as before. The codec's client refuses heads over 64 KiB.
const maxNoted = 64 << 10

// connNames are the fields a response's Connection fields name.
type connNames struct {
	mu    sync.Mutex
	names []string
}

func (n *connNames) set(names []string) {
	n.mu.Lock()
	n.names = names
	n.mu.Unlock()
}

// removeFrom deletes the noted fields from res, when net/http removed the
// Connection field that named them (a field it kept is removed with what it
// names by the connection manager). A 101's fields are the upgrade's.
func (n *connNames) removeFrom(res *http.Response) {
	n.mu.Lock()
	names := n.names
	n.mu.Unlock()
	if len(names) == 0 || res.ProtoMajor != 1 || res.StatusCode == http.StatusSwitchingProtocols || res.Header["Connection"] != nil {
		return
	}
	for _, name := range names {
		res.Header.Del(name)
	}
}

// namesConn is an upstream HTTP/1.1 connection that notes the Connection
// fields of the final response head read after await.
type namesConn struct {
	net.Conn
	mu   sync.Mutex
	want *connNames // nil: nothing awaited
	head []byte
}

// await makes the next final response head's names go to n. http.Transport
// calls it (GotConn) before it writes the request, so before any byte of the
// response can arrive.
func (c *namesConn) await(n *connNames) {
	c.mu.Lock()
	c.want, c.head = n, c.head[:0]
	c.mu.Unlock()
}

func (c *namesConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.note(p[:n])
	}
	return n, err
}

// note adds read bytes to the awaited head until it is whole; 1xx heads before
// the final one are skipped.
func (c *namesConn) note(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.want == nil {
		return
	}
	if len(c.head)+len(b) > maxNoted {
		c.want, c.head = nil, c.head[:0]
		return
	}
	c.head = append(c.head, b...)
	for {
		end := headEnd(c.head)
		if end < 0 {
			return
		}
		if interim, names := headNames(c.head[:end]); !interim {
			c.want.set(names)
			c.want, c.head = nil, c.head[:0]
			return
		}
		c.head = append(c.head[:0], c.head[end:]...)
	}
}

// headEnd is the length of the head at the start of b (up to its empty line,
// which a bare LF may end, as net/http reads it), or -1.
func headEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		switch {
		case i >= 1 && b[i-1] == '\n':
			return i + 1
		case i >= 2 && b[i-1] == '\r' && b[i-2] == '\n':
			return i + 1
		}
	}
	return -1
}

// headNames reads a response head: whether it is an interim (1xx but 101)
// one, and the names its Connection fields list.
func headNames(head []byte) (interim bool, names []string) {
	line, rest, _ := bytes.Cut(head, []byte("\n"))
	if _, status, ok := bytes.Cut(line, []byte(" ")); ok && len(status) >= 3 && status[0] == '1' {
		interim = !bytes.HasPrefix(status, []byte("101"))
	}
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || !bytes.EqualFold(name, []byte("Connection")) {
			continue
		}
		for tok := range bytes.SplitSeq(value, []byte(",")) {
			if t := textproto.TrimString(string(tok)); t != "" && !equalFoldString(t, "close") {
				names = append(names, t)
			}
		}
	}
	return interim, names
}

func equalFoldString(a, b string) bool { return bytes.EqualFold([]byte(a), []byte(b)) }

// namesTLSConn is a namesConn over TLS: http.Transport reads the connection
// state of what DialTLSContext returns through these methods.
type namesTLSConn struct {
	*namesConn
	tc *tls.Conn
}

func (c namesTLSConn) ConnectionState() tls.ConnectionState { return c.tc.ConnectionState() }
func (c namesTLSConn) HandshakeContext(ctx context.Context) error {
	return c.tc.HandshakeContext(ctx)
}

// noteNames wraps a dial function so that its connections note response
// heads' Connection fields.
func noteNames(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		nc := &namesConn{Conn: c}
		if tc, ok := c.(*tls.Conn); ok {
			return namesTLSConn{nc, tc}, nil
		}
		return nc, nil
	}
}

// namesRoundTrip exchanges req on rt, whose connections are namesConns, and
// removes from the response the fields its Connection fields named.
func namesRoundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	names := new(connNames)
	trace := &httptrace.ClientTrace{GotConn: func(g httptrace.GotConnInfo) {
		if c, ok := g.Conn.(interface{ await(*connNames) }); ok {
			c.await(names)
		}
	}}
	res, err := rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err == nil {
		names.removeFrom(res)
	}
	return res, err
}
