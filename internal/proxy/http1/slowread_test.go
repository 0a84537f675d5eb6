package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// The outcomes below are waited for this long: far beyond the 1 s timeouts
// configured, so that a loaded machine does not fail them, and short enough
// that a write never bounded fails the test rather than hanging it.
const slowReadWait = 60 * time.Second

// serveOne serves the first connection accepted on a loopback listener with
// s and returns the listener's address and a channel closed when ServeConn
// returns. server, if set, is applied to the accepted connection first.
func serveOne(t *testing.T, s *Server, server func(*net.TCPConn)) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = ln.Close()
		s.Close()
		<-done
	})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if server != nil {
			server(c.(*net.TCPConn))
		}
		s.ServeConn(c, nil)
	}()
	return ln.Addr().String(), done
}

// writeForever writes the response body in 32 KiB pieces until a write fails
// (a response larger than any socket buffer), and reports the error.
func writeForever(failed chan<- error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		piece := bytes.Repeat([]byte("x"), 32<<10)
		for {
			if _, err := w.Write(piece); err != nil {
				failed <- err
				return
			}
		}
	}
}

func waitServed(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(slowReadWait):
		t.Fatalf("%s: the connection is still served after %v", what, slowReadWait)
	}
}

func waitWriteFailed(t *testing.T, failed <-chan error) {
	t.Helper()
	select {
	case err := <-failed:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the handler's write failed with %v, want the deadline exceeded", err)
		}
	case <-time.After(slowReadWait):
		t.Fatalf("the handler's write still blocks after %v", slowReadWait)
	}
}

// A client that sends a request and never reads the response does not hold
// the connection: once a write to it has made no progress for the stream
// idle timeout (the server's, or the one the handler set for its response),
// the write fails and the connection closes, whether the handler was writing
// or the codec was flushing what the handler left after it returned.
func TestServeCutsAClientThatStopsReading(t *testing.T) {
	t.Parallel()
	second := func(context.Context) time.Duration { return time.Second }
	// The handler writes a body larger than any socket buffer; the server is
	// s with that handler, given as the handler to wrap.
	whileWriting := func(t *testing.T, s func(http.HandlerFunc) *Server) {
		t.Parallel()
		failed := make(chan error, 1)
		addr, done := serveOne(t, s(writeForever(failed)), nil)
		c, _ := dial(t, addr)
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		waitWriteFailed(t, failed)
		waitServed(t, done, "after the handler's write failed")
	}
	t.Run("the handler writes", func(t *testing.T) {
		whileWriting(t, func(h http.HandlerFunc) *Server { return &Server{Handler: h, StreamIdleTimeout: second} })
	})
	t.Run("the handler sets the timeout", func(t *testing.T) {
		whileWriting(t, func(h http.HandlerFunc) *Server {
			return &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.(interface{ SetWriteIdleTimeout(time.Duration) }).SetWriteIdleTimeout(time.Second)
				h(w, r)
			})}
		})
	})
	t.Run("the flush after the handler returned", func(t *testing.T) {
		t.Parallel()
		// A pipe holds no byte: the response the handler leaves in the write
		// buffer is all that is left to send, and its flush blocks.
		client, server := net.Pipe()
		t.Cleanup(func() { _ = client.Close() })
		s := &Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "hello")
		}), StreamIdleTimeout: second}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.ServeConn(server, nil)
		}()
		_ = client.SetWriteDeadline(time.Now().Add(slowReadWait))
		if _, err := io.WriteString(client, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		waitServed(t, done, "the handler returned")
	})
}

// A client that reads slowly but steadily is not cut, even when the handler
// hands the codec its whole body in one write that takes longer than the
// timeout to go out: the deadline moves as the write makes progress. The
// sockets' buffers are made small, so that the body cannot hide in them.
func TestServeSteadySlowReaderIsNotCut(t *testing.T) {
	t.Parallel()
	const size = 2 << 20
	failed := make(chan error, 1)
	addr, done := serveOne(t, &Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "2097152")
			if _, err := w.Write(bytes.Repeat([]byte("x"), size)); err != nil {
				failed <- err
			}
		}),
		StreamIdleTimeout: func(context.Context) time.Duration { return time.Second },
	}, func(c *net.TCPConn) { _ = c.SetWriteBuffer(16 << 10) })
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		})
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// 8 KiB every 10 ms: about 2.6 s for the body, 80 ms per 64 KiB piece.
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	buf := make([]byte, 8<<10)
	start := time.Now()
	for {
		m, err := io.ReadFull(resp.Body, buf)
		n += int64(m)
		if err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n != size {
		t.Fatalf("read %d bytes in %v, want %d: the connection was cut", n, time.Since(start), size)
	}
	select {
	case err := <-failed:
		t.Fatalf("the handler's write failed: %v", err)
	default:
	}
	waitServed(t, done, "after the response")
}
