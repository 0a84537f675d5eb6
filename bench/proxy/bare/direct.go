package main

import (
	"io"
	"net"
	"net/http"
	"strconv"
)

// direct forwards each request over a pooled upstream connection from the handler's
// own goroutine: the request written with one buffered write, the response read with
// http.ReadResponse, the body copied. It has none of http.Transport's per-connection
// read and write goroutines (and their channel handoffs), so the difference between it
// and the Transport-based proxy is what those goroutines cost per request: the floor a
// Go proxy would reach by owning its upstream HTTP/1.1 client. It is a measuring
// instrument, not a proxy: GET-style requests with no body or a Content-Length body,
// HTTP/1.1 upstreams, no trailers, upgrades or 1xx responses.
type direct struct {
	addr string
	bufs *buffers
	pool idlePool
}

// hopByHop are the headers a proxy does not forward (RFC 9110 section 7.6.1).
var hopByHop = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

func (d *direct) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength < 0 || r.Header.Get("Upgrade") != "" {
		http.Error(w, "the direct bench proxy forwards only bodies of known length", http.StatusNotImplemented)
		return
	}
	uc, err := d.get()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	resp, err := d.exchange(uc, r)
	if err != nil {
		uc.conn.Close()
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	h := w.Header()
	for k, vs := range resp.Header {
		if !hopByHop[k] {
			h[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	buf := d.bufs.Get()
	_, copyErr := io.CopyBuffer(w, resp.Body, buf)
	d.bufs.Put(buf)
	resp.Body.Close()
	if copyErr != nil || resp.Close {
		uc.conn.Close()
		return
	}
	d.put(uc)
}

// exchange writes r to uc and reads the response head.
func (d *direct) exchange(uc *upstreamConn, r *http.Request) (*http.Response, error) {
	bw := uc.w
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(r.Host)
	bw.WriteString("\r\n")
	for k, vs := range r.Header {
		if hopByHop[k] {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		bw.WriteString("X-Forwarded-For: ")
		bw.WriteString(host)
		bw.WriteString("\r\n")
	}
	if r.ContentLength > 0 {
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.FormatInt(r.ContentLength, 10))
		bw.WriteString("\r\n\r\n")
		if _, err := io.CopyN(bw, r.Body, r.ContentLength); err != nil {
			return nil, err
		}
	} else {
		bw.WriteString("\r\n")
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return http.ReadResponse(uc.r, r)
}

func (d *direct) get() (*upstreamConn, error) {
	if uc := d.pool.take(); uc != nil {
		return uc, nil
	}
	return dialUpstream(d.addr)
}

func (d *direct) put(uc *upstreamConn) { d.pool.put(uc) }
