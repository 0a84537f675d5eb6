package main

import (
	"bufio"
	"net"
	"sync"
)

// upstreamConn is a connection to the backend with its buffers, kept between
// requests by the sides that own their upstream HTTP/1.1 client (direct, raw).
type upstreamConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	resp head // the raw side's parsed response, reused
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
