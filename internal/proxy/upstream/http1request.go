package upstream

import (
	"bufio"
	"errors"
	"io"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/portico-dev/portico/internal/proxy/http1"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// writeRequestHead writes a request's head as http.Request.Write would,
// without its allocations: the request line, Host, User-Agent (none when the
// header is there but empty, as ReverseProxy asks for), the framing (a known
// length as Content-Length, else chunked with the trailer names declared;
// Content-Length: 0 for POST, PUT and PATCH without a body), the other fields
// in name order, line breaks in values made spaces. keys is scratch space,
// returned for reuse. The body is writeBody's.
func writeRequestHead(w *bufio.Writer, req *http.Request, keys []string) ([]string, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !isASCII(host) {
		var err error
		if host, err = httpguts.PunycodeHostPort(host); err != nil {
			return keys, err
		}
	}
	if !httpguts.ValidHostHeader(host) {
		return keys, errors.New("http: invalid Host header")
	}
	host = removeZone(host)
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	if !validMethod(method) {
		return keys, errors.New("net/http: invalid method " + method)
	}
	uri := req.URL.RequestURI()
	if hasCTL(uri) {
		return keys, errors.New("net/http: can't write control character in Request.URL")
	}
	_, _ = w.WriteString(method)
	_ = w.WriteByte(' ')
	_, _ = w.WriteString(uri)
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(host)
	_, _ = w.WriteString("\r\n")
	ua := "Go-http-client/1.1"
	if v, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if ua != "" {
		writeField(w, "User-Agent", ua)
	}
	switch {
	case chunked(req):
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
		if len(req.Trailer) > 0 {
			names := make([]string, 0, len(req.Trailer))
			for k := range req.Trailer {
				names = append(names, k)
			}
			slices.Sort(names)
			writeField(w, "Trailer", strings.Join(names, ","))
		}
	case hasBody(req):
		_, _ = w.WriteString("Content-Length: ")
		_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
		_, _ = w.WriteString("\r\n")
	case method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		_, _ = w.WriteString("Content-Length: 0\r\n") // many servers expect it
	}
	keys = keys[:0]
	for k := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range req.Header[k] {
			writeField(w, k, v)
		}
	}
	if req.Close && !hasCloseToken(req.Header["Connection"]) {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	_, err := w.WriteString("\r\n")
	return keys, err
}

// writeField writes one field as net/http does: line breaks in the value
// become spaces, the value is trimmed.
func writeField(w *bufio.Writer, k, v string) {
	if hasLineBreak(v) {
		v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v)
	}
	_, _ = w.WriteString(k)
	_, _ = w.WriteString(": ")
	_, _ = w.WriteString(trimBlanks(v))
	_, _ = w.WriteString("\r\n")
}

// hasLineBreak, trimBlanks and hasCTL are strings.ContainsAny, strings.Trim
// and strings.ContainsFunc for the bytes at hand, without their general
// cases' cost (every field of every request comes through: a third, a tenth
// and a half of their time).
func hasLineBreak(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' {
			return true
		}
	}
	return false
}

// trimBlanks removes the spaces and tabs around v.
func trimBlanks(v string) string {
	for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
		v = v[1:]
	}
	for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
		v = v[:len(v)-1]
	}
	return v
}

// hasCTL reports whether s holds a control byte (below space, or DEL); bytes
// of multi-byte UTF-8 sequences are never one.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// removeZone drops an IPv6 zone from a Host ("[fe80::1%en0]:80"), which a
// server would not understand, as net/http does.
func removeZone(host string) string {
	if !strings.HasPrefix(host, "[") {
		return host
	}
	i := strings.LastIndex(host, "]")
	if i < 0 {
		return host
	}
	j := strings.LastIndex(host[:i], "%")
	if j < 0 {
		return host
	}
	return host[:j] + host[i:]
}

func validMethod(m string) bool {
	return len(m) > 0 && !strings.ContainsFunc(m, func(r rune) bool { return !httpguts.IsTokenRune(r) })
}

func hasCloseToken(values []string) bool {
	return httpguts.HeaderValuesContainsToken(values, "close")
}

// hasBody reports whether req has a body to send.
func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0
}

// chunked reports whether req's body is sent chunked: its length is unknown,
// or it has trailers.
func chunked(req *http.Request) bool {
	return hasBody(req) && (req.ContentLength < 0 || len(req.Trailer) > 0)
}

// bodyReadError is a failure to read the request body (the client's, not the
// upstream's): RoundTrip returns it as it is, so that the connection manager
// answers as the client's fault.
type bodyReadError struct{ err error }

func (e *bodyReadError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *bodyReadError) Unwrap() error { return e.err }

// errBodyLength: a body longer or shorter than its Content-Length.
var errBodyLength = errors.New("http: request body length differs from its Content-Length")

// errBodyNotSent: the upstream gave its final response before the 100
// Continue the request waited for, and its body was never sent; the
// connection, whose request is unfinished, is not reused.
var errBodyNotSent = errors.New("the upstream answered before its 100 Continue: the request body was not sent")

// writeBody writes req's body after its head, flushing what each read
// returns (bodies stream), then reports on pc.bodySent. With sendBody, the
// body waits for the word to send it (the upstream's 100 Continue) or for
// the client's expectContinueTimeout, whichever comes first. A failure to
// read the body cuts the exchange (the connection closes, so that the
// response read ends too); the connection is never reused after any failure.
func (pc *http1Conn) writeBody(req *http.Request, trace *httptrace.ClientTrace, sent chan<- error, sendBody <-chan bool) {
	if sendBody != nil && !waitForContinue(sendBody, pc.client.expectContinueTimeout) {
		// Never a byte of the body: the caller reads the response, and closes.
		if trace != nil && trace.WroteRequest != nil {
			trace.WroteRequest(httptrace.WroteRequestInfo{Err: errBodyNotSent})
		}
		sent <- errBodyNotSent
		return
	}
	err := pc.copyBody(req)
	if err != nil {
		var re *bodyReadError
		if errors.As(err, &re) {
			pc.bodyFailed.Store(re) // before the close the caller will see
		}
		_ = pc.conn.Close()
	}
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	sent <- err
}

// waitForContinue waits for the word on sendBody, or for timeout (the
// upstream may not know 100 Continue: the body is then sent anyway, as
// RFC 9110 section 10.1.1 lets a client do).
func waitForContinue(sendBody <-chan bool, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case send := <-sendBody:
		return send
	case <-timer.C:
		return true
	}
}

func (pc *http1Conn) copyBody(req *http.Request) error {
	buf := bodyBuffers.Get().(*[32 << 10]byte)
	defer bodyBuffers.Put(buf)
	w := pc.bw
	isChunked := chunked(req)
	remaining := req.ContentLength
	for {
		n, rerr := req.Body.Read(buf[:])
		if rerr == io.EOF {
			// Before the last flush, which the upstream may answer at once:
			// release then waits for that flush rather than give up the
			// connection.
			pc.bodyEOF.Store(true)
		}
		if n > 0 {
			if !isChunked {
				if int64(n) > remaining {
					return &bodyReadError{errBodyLength}
				}
				remaining -= int64(n)
				_, _ = w.Write(buf[:n])
				if remaining == 0 {
					// The whole body, before its flush: the upstream may
					// answer at once, and release must then wait for this
					// writer, not give up the connection. The writer ends
					// with the flush, without a read for io.EOF: that read
					// can wait on the client for as long as it likes (an
					// HTTP/2 stream that ends only after its response), and
					// release would hold the response's end for it. Nothing
					// past the length is ever written.
					pc.bodyEOF.Store(true)
					return w.Flush()
				}
			} else {
				_, _ = http1.ChunkedWriter{W: w}.Write(buf[:n])
			}
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return &bodyReadError{rerr}
		}
	}
	if !isChunked {
		if remaining != 0 {
			return &bodyReadError{errBodyLength}
		}
		return nil
	}
	_, _ = w.WriteString("0\r\n")
	for k, vs := range req.Trailer {
		for _, v := range vs {
			writeField(w, k, v)
		}
	}
	_, _ = w.WriteString("\r\n")
	return w.Flush()
}

var bodyBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// bodyError is the body's read failure if it cut the exchange (the writer
// closed the connection, which is what the caller saw); it never waits.
func (pc *http1Conn) bodyError() error {
	if re := pc.bodyFailed.Load(); re != nil {
		return re
	}
	return nil
}
