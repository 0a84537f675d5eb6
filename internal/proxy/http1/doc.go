// Package http1 is the embedded proxy's HTTP/1.1 codec: a strict RFC 9112
// message parser (head.go, body.go) and a server that serves connections with
// it (server.go, response.go), handing each request to an http.Handler as
// net/http's server would, so that the connection manager above serves both
// codecs alike. HTTP/2 stays on Go's implementation.
//
// Why a codec of our own, and not net/http's server or fasthttp, is recorded
// in docs/dev/http1-codec.md: net/http's server spends a goroutine, a context
// and reads per request that no tuning above it removes; fasthttp normalises
// and repairs what a proxy must refuse. What this codec answers to each
// malformed or ambiguous message is the corpus of internal/h1corpus.
//
// Everything two parsers on a path could read two ways is refused rather than
// repaired: bare LF, obs-fold, whitespace before a colon, control bytes, a
// Transfer-Encoding other than one "chunked", Transfer-Encoding with
// Content-Length, Content-Length values that disagree or are not plain digits,
// malformed chunk framing.
package http1
