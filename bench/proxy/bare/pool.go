package main

import (
	"bufio"
	"net"
	"sync"

	"github.com/portico-dev/portico/internal/proxy/http1"
)

// upstreamConn is a connection to the backend with its buffers, kept between
// requests by the sides that own their upstream HTTP/1.1 client (direct, raw).
type upstreamConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	resp http1.Head       // the raw side's parsed response, reused
	body http1.BodyReader // and its body
}

func dialUpstream(addr string) (*upstreamConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &upstreamConn{conn: c, r: bufio.NewReaderSize(c, 4096), w: bufio.NewWriterSize(c, 4096)}, nil
}

// idlePool holds idle upstream connections, last in first out, up to Portico's
// pool size.
type idlePool struct {
	mu   sync.Mutex
	idle []*upstreamConn
}

// take returns an idle connection, or nil.
func (p *idlePool) take() *upstreamConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	uc := p.idle[n-1]
	p.idle = p.idle[:n-1]
	return uc
}

func (p *idlePool) put(uc *upstreamConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) >= maxIdlePerHost {
		uc.conn.Close()
		return
	}
	p.idle = append(p.idle, uc)
}
