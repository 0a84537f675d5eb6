package upstream

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestHTTP1BodyReadAfterItsEnd: a response body read to its end has given
// its connection back to the pool, where the next exchange reads its own
// response through the same reader; reading the first body again must not
// take the next one's bytes.
func TestHTTP1BodyReadAfterItsEnd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		for _, body := range []string{"first!", "second"} {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"+body)
		}
	}()
	c := NewHTTP1Client(&http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute})
	defer c.CloseIdleConnections()
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		res, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := get()
	if b, err := io.ReadAll(first.Body); err != nil || string(b) != "first!" {
		t.Fatalf("first body %q, %v", b, err)
	}
	second := get()
	if n, err := first.Body.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("the first body read again: %d bytes, %v; want 0, EOF", n, err)
	}
	b, err := io.ReadAll(second.Body)
	if err != nil || string(b) != "second" {
		t.Errorf("second body %q, %v; want \"second\"", b, err)
	}
}
