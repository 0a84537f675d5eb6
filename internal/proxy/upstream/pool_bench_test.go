package upstream

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// BenchmarkReusePooledConnection measures what taking a pooled connection
// and pooling it again costs a request, the look at its socket included (a
// system call on Linux): the part of the pool's work that grows with the
// checks made before reuse.
func BenchmarkReusePooledConnection(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := ln.Accept()
		if err == nil {
			accepted <- conn
		}
	}()
	addr := ln.Addr().String()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer (<-accepted).Close()
	c := NewHTTP1Client(&http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute})
	defer c.CloseIdleConnections()
	c.put(newHTTP1Conn(c, addr, conn))
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		pc, err := c.conn(ctx, req, false, nil)
		if err != nil || !pc.reused {
			b.Fatalf("no pooled connection: %v", err)
		}
		c.put(pc)
	}
}
