package main

import (
	"net"

	"github.com/valyala/fasthttp"
)

// fastProxy is the bare fasthttp reverse proxy: fasthttp.Server downstream, one
// fasthttp.HostClient upstream (keep-alive, a pool as large as Portico's), request and
// response bodies streamed rather than buffered whole (fasthttp's default buffers them),
// header names and paths passed through as received. Like the other bare sides it has
// no routing, logs, metrics or timeouts: it is the codec's floor, not a proxy to ship.
type fastProxy struct {
	client *fasthttp.HostClient
}

func newFastProxy(backend string) *fastProxy {
	return &fastProxy{client: &fasthttp.HostClient{
		Addr:                          backend,
		MaxConns:                      maxIdlePerHost,
		StreamResponseBody:            true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		// The other sides do not retry a failed exchange either.
		MaxIdemponentCallAttempts: 1,
	}}
}

// server returns the downstream side, configured as a proxy needs it: no header
// normalisation, no Date or Content-Type of its own, streamed request bodies.
func (p *fastProxy) server() *fasthttp.Server {
	return &fasthttp.Server{
		Handler:                       p.serve,
		StreamRequestBody:             true,
		DisableHeaderNamesNormalizing: true,
		DisablePreParseMultipartForm:  true,
		NoDefaultServerHeader:         true,
		NoDefaultDate:                 true,
		NoDefaultContentType:          true,
		ReadBufferSize:                8 << 10,
	}
}

// fastHopByHop are the headers a proxy does not forward (RFC 9110 section 7.6.1).
var fastHopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Upgrade"}

func (p *fastProxy) serve(ctx *fasthttp.RequestCtx) {
	req := &ctx.Request
	// Deleting Connection also clears the request's close flag; the server remembers
	// the client's wish before the handler runs, and this says it again. Either way the
	// Response then carries Connection: close, which the HostClient reads as its own
	// upstream connection's end when the streamed body is released (client.go,
	// releaseConn): one Response for both hops. See docs/dev/http1-codec.md.
	closeAfter := req.Header.ConnectionClose()
	for _, h := range fastHopByHop {
		req.Header.Del(h)
	}
	if ip, ok := ctx.RemoteAddr().(*net.TCPAddr); ok {
		req.Header.Add("X-Forwarded-For", ip.IP.String())
	}
	// Behind the TLS listener the URI says https; the HostClient speaks plain HTTP
	// and refuses a URI of another scheme.
	if ctx.IsTLS() {
		req.URI().SetScheme("http")
	}
	resp := &ctx.Response
	if err := p.client.Do(req, resp); err != nil {
		ctx.Error(err.Error(), fasthttp.StatusBadGateway)
		return
	}
	for _, h := range fastHopByHop {
		resp.Header.Del(h)
	}
	if closeAfter {
		ctx.SetConnectionClose()
	}
}
