package http1

// Differential fuzzing against net/http: the same bytes go to this codec and
// to net/http's parser (http.ReadRequest, http.ReadResponse), message after
// message as on a keep-alive connection. A message one parser accepts
// (head and complete body) and the other refuses, or that both accept but
// read differently (what the proxy would forward: method, target, header
// fields as net/http canonicalises them, body, trailer, whether the
// connection ends), fails the test unless one of the decisions below covers
// it. docs/dev/http1-corpus.md has the same list as a table.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"golang.org/x/net/http/httpguts"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/internal/h1corpus"
)

// maxMessages bounds the messages read from one input.
const maxMessages = 8

// parsed is what a parser read of one message: what the proxy forwards, and
// how much of the input the message took.
type parsed struct {
	method, target string // requests
	host           string // requests in origin-form or asterisk-form: the Host field
	status         int    // responses
	reason         string
	header         http.Header
	body           []byte
	trailer        http.Header
	close          bool // the connection carries no further message
	n              int
}

func (p *parsed) String() string {
	return fmt.Sprintf("%s %s host=%q %d %q close=%v header=%s body=%q trailer=%s (%d bytes)",
		p.method, p.target, p.host, p.status, p.reason, p.close, dump(p.header), p.body, dump(p.trailer), p.n)
}

func dump(h http.Header) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range h {
			if len(h[k]) > 0 && !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "%s=%q;", k, h[k])
	}
	return b.String()
}

// side is a parser under comparison.
type side struct {
	readRequest  func(in []byte) (*parsed, error)
	readResponse func(in []byte, headRequest bool) (*parsed, error)
}

// consumed is how much of in a reader over it took.
func consumed(in []byte, r *bytes.Reader, br *bufio.Reader) int {
	return len(in) - r.Len() - br.Buffered()
}

var codec = side{
	readRequest: func(in []byte) (*parsed, error) {
		r := bytes.NewReader(in)
		br := bufio.NewReader(r)
		var h Head
		if err := h.ReadRequest(br, Limits{}); err != nil {
			return nil, err
		}
		var b BodyReader
		b.Reset(br, &h)
		p := &parsed{method: string(h.Method()), target: string(h.Target()), close: h.Close}
		if err := p.readBody(&h, &b, in, r, br); err != nil {
			return nil, err
		}
		// net/http takes Host out of the header, into Request.Host, which the
		// target's authority replaces: compared where there is none.
		if strings.HasPrefix(p.target, "/") || p.target == "*" {
			p.host = p.header.Get("Host")
		}
		delete(p.header, "Host")
		return p, nil
	},
	readResponse: func(in []byte, headRequest bool) (*parsed, error) {
		r := bytes.NewReader(in)
		br := bufio.NewReader(r)
		var h Head
		if err := h.ReadResponse(br, Limits{}); err != nil {
			return nil, err
		}
		var b BodyReader
		b.ResetResponse(br, &h, headRequest)
		p := &parsed{status: h.Status, reason: string(h.Reason()), close: h.Close || b.UntilEOF() || h.Status == 101}
		if err := p.readBody(&h, &b, in, r, br); err != nil {
			return nil, err
		}
		return p, nil
	},
}

// readBody reads the body and fills in the header and trailer as net/http
// hands them on: names canonicalised, and the fields net/http consumes
// itself taken out (see netHTTPHeader).
func (p *parsed) readBody(h *Head, b *BodyReader, in []byte, r *bytes.Reader, br *bufio.Reader) error {
	var err error
	if p.body, err = io.ReadAll(b); err != nil {
		return err
	}
	p.header, p.trailer = http.Header{}, http.Header{}
	for i := range h.NumFields() {
		name, value := h.Field(i)
		p.header.Add(string(name), string(value))
	}
	for i := range b.Trailer.NumFields() {
		name, value := b.Trailer.Field(i)
		p.trailer.Add(string(name), string(value))
	}
	netHTTPHeader(p.header, h)
	p.n = consumed(in, r, br)
	return nil
}

// netHTTPHeader applies to a codec's header what net/http does to the one it
// returns, so that the two compare: Transfer-Encoding becomes
// TransferEncoding, a chunked message's Trailer field becomes the Trailer
// map's keys, repeated equal Content-Length fields become one, Pragma:
// no-cache adds Cache-Control: no-cache (fixPragmaCacheControl), and a
// response's Connection: close goes (shouldClose). None of this is in what
// the codec forwards differently: the proxy regenerates framing and
// Connection.
func netHTTPHeader(header http.Header, h *Head) {
	if h.Chunked {
		delete(header, "Transfer-Encoding")
		delete(header, "Trailer")
	}
	if cl := header["Content-Length"]; len(cl) > 1 {
		header["Content-Length"] = cl[:1]
	}
	if p := header["Pragma"]; len(p) > 0 && p[0] == "no-cache" && header["Cache-Control"] == nil {
		header["Cache-Control"] = []string{"no-cache"}
	}
	if h.Status != 0 && h.Minor == 1 && headerHasToken(header["Connection"], "close") {
		delete(header, "Connection")
	}
}

func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for elem := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(elem), token) {
				return true
			}
		}
	}
	return false
}

var netHTTP = side{
	readRequest: func(in []byte) (*parsed, error) {
		r := bytes.NewReader(in)
		br := bufio.NewReader(r)
		req, err := http.ReadRequest(br)
		if err != nil {
			return nil, err
		}
		p := &parsed{method: req.Method, target: req.RequestURI, header: req.Header, close: req.Close}
		if strings.HasPrefix(p.target, "/") || p.target == "*" {
			p.host = req.Host
		}
		if p.body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		p.trailer, p.n = received(req.Trailer), consumed(in, r, br)
		return p, nil
	},
	readResponse: func(in []byte, headRequest bool) (*parsed, error) {
		r := bytes.NewReader(in)
		br := bufio.NewReader(r)
		method := http.MethodGet
		if headRequest {
			method = http.MethodHead
		}
		res, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return nil, err
		}
		_, reason, _ := strings.Cut(res.Status, " ")
		p := &parsed{status: res.StatusCode, reason: reason, header: res.Header, close: res.Close || res.StatusCode == 101}
		if p.body, err = io.ReadAll(res.Body); err != nil {
			return nil, err
		}
		p.trailer, p.n = received(res.Trailer), consumed(in, r, br)
		return p, nil
	},
}

// received is the trailer fields net/http read: its Trailer map also holds
// the names the Trailer field announced, with no value.
func received(trailer http.Header) http.Header {
	got := http.Header{}
	for k, v := range trailer {
		if len(v) > 0 {
			got[k] = v
		}
	}
	return got
}

func (p *parsed) differs(q *parsed) bool {
	return p.method != q.method || p.target != q.target || p.host != q.host || p.status != q.status || p.reason != q.reason ||
		dump(p.header) != dump(q.header) || !bytes.Equal(p.body, q.body) || dump(p.trailer) != dump(q.trailer) ||
		p.close != q.close || p.n != q.n
}

// A decision is a documented difference between the codec and net/http: the
// inputs it covers (a predicate on the message's bytes and on the codec's
// error), which parser accepts them, and why.
type decision struct {
	name string
	// accepts is "net/http" (the codec refuses what net/http accepts),
	// "codec" (the other way round) or "both" (both accept, and read the
	// message differently).
	accepts string
	reason  string
	applies func(m *message) bool
}

// message is one message of an input, as the decisions see it.
type message struct {
	in       []byte // from the message's first byte to the end of the input
	response bool
	codecErr error
	codec    *parsed
	netHTTP  *parsed
}

// lines splits the message's head at LF (the line ends kept), up to and
// including its first empty line.
func (m *message) headLines() [][]byte {
	var lines [][]byte
	for rest := m.in; len(rest) > 0; {
		line, tail, _ := bytes.Cut(rest, []byte("\n"))
		lines = append(lines, line)
		if len(lines) > 1 && len(bytes.TrimSuffix(line, []byte("\r"))) == 0 {
			break
		}
		rest = tail
	}
	return lines
}

// fieldNames is the head's field names (up to the first colon), the start
// line left out.
func (m *message) fieldNames() []string {
	var names []string
	lines := m.headLines()
	for _, line := range lines[min(1, len(lines)):] {
		if name, _, ok := bytes.Cut(line, []byte(":")); ok {
			names = append(names, string(name))
		}
	}
	return names
}

// fields is every line of the message (head, body, trailer) that has a
// colon, as a name and a value without surrounding whitespace.
func (m *message) fields() [][2]string {
	var fields [][2]string
	for _, l := range bytes.Split(m.in, []byte("\n")) {
		if name, value, ok := bytes.Cut(l, []byte(":")); ok {
			fields = append(fields, [2]string{string(name), strings.Trim(string(value), " \t\r")})
		}
	}
	return fields
}

func (m *message) hasField(name string) bool {
	for _, n := range m.fieldNames() {
		if strings.EqualFold(strings.TrimSpace(n), name) {
			return true
		}
	}
	return false
}

func (m *message) startLine() string {
	lines := m.headLines()
	if len(lines) == 0 {
		return ""
	}
	return string(bytes.TrimSuffix(lines[0], []byte("\r")))
}

// target is a request's target, as the request line has it.
func (m *message) target() (method, target string) {
	method, rest, _ := strings.Cut(m.startLine(), " ")
	target, _, _ = strings.Cut(rest, " ")
	return method, target
}

// bodyLines is every line after the head: chunk-size lines and trailer
// fields are among them.
func (m *message) bodyLines() [][]byte {
	head := 0
	for _, l := range m.headLines() {
		head += len(l) + 1
	}
	if head >= len(m.in) {
		return nil
	}
	return bytes.Split(m.in[head:], []byte("\n"))
}

// chunk is a chunk of a body the codec read: its size line (without CRLF),
// its size, and after the last one, the trailer section (CRLFs included).
type chunk struct {
	line    []byte
	size    int
	trailer []byte
}

// chunks walks the chunked body of a message the codec accepted (and so
// well-formed).
func (m *message) chunks() []chunk {
	if m.codec == nil {
		return nil
	}
	head := 0
	for _, l := range m.headLines() {
		head += len(l) + 1
	}
	body := m.in[min(head, m.codec.n):m.codec.n]
	var chunks []chunk
	for len(body) > 0 {
		line, rest, ok := bytes.Cut(body, []byte("\r\n"))
		if !ok {
			return chunks
		}
		size := 0
		for _, c := range line {
			d, ok := hexDigit(c)
			if !ok {
				break
			}
			size = size<<4 | int(d)
		}
		c := chunk{line: line, size: size}
		if size == 0 {
			c.trailer = rest
			return append(chunks, c)
		}
		chunks = append(chunks, c)
		body = rest[min(size+2, len(rest)):]
	}
	return chunks
}

func (m *message) codecRefused(err error) bool { return errors.Is(m.codecErr, err) }

// urlHostBytes are the bytes net/url lets into a host.
const urlHostBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:[]<>\"%"

// badEscape reports a '%' not followed by two hex digits.
func badEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2])) {
			return true
		}
	}
	return false
}

func isHex(c byte) bool { _, ok := hexDigit(c); return ok }

// decisions are the documented differences, the same list as the table in
// docs/dev/http1-corpus.md.
var decisions = []decision{
	{
		name: "bare-lf", accepts: "net/http",
		reason: "a line ended by LF alone (RFC 9112 §2.2 lets a recipient accept it): two parsers on a path that split lines differently frame differently",
		applies: func(m *message) bool {
			return m.codecRefused(errBareLF) && slices.ContainsFunc(bytes.SplitAfter(m.in, []byte("\n")), func(l []byte) bool {
				return bytes.HasSuffix(l, []byte("\n")) && !bytes.HasSuffix(l, []byte("\r\n"))
			})
		},
	},
	{
		name: "obs-fold", accepts: "net/http",
		reason: "a field line continued on the next line (obs-fold, RFC 9112 §5.2: reject or replace by spaces); net/http joins the lines",
		applies: func(m *message) bool {
			folded := func(l []byte) bool { return len(l) > 0 && (l[0] == ' ' || l[0] == '\t') }
			// A fold after an empty value can be refused as that value; in a
			// trailer, the fold itself is.
			var e *Error
			return m.codecRefused(errObsFold) && slices.ContainsFunc(bytes.Split(m.in, []byte("\n"))[1:], folded) ||
				errors.As(m.codecErr, &e) && e.Status == 400 && slices.ContainsFunc(m.headLines()[1:], folded)
		},
	},
	{
		name: "te-and-cl", accepts: "net/http",
		reason: "Transfer-Encoding with Content-Length (RFC 9112 §6.3 item 3: reject, or frame by Transfer-Encoding and close): the classic smuggling pair, refused",
		applies: func(m *message) bool {
			return m.codecRefused(errTEAndCL) && m.hasField("Transfer-Encoding") && m.hasField("Content-Length")
		},
	},
	{
		name: "te-http10", accepts: "net/http",
		reason: "Transfer-Encoding in an HTTP/1.0 message (RFC 9112 §6.1: faulty framing); net/http ignores the field and frames by Content-Length",
		applies: func(m *message) bool {
			return m.codecRefused(errTE10) && m.hasField("Transfer-Encoding") && strings.Contains(m.startLine(), "HTTP/1.0")
		},
	},
	{
		name: "space-in-field-name", accepts: "net/http",
		reason: "a space in a field name or before its colon (RFC 9112 §5.1: 400; a proxy must not forward it); net/http keeps the name with the space (its server then refuses requests, its client keeps it in responses)",
		applies: func(m *message) bool {
			return m.codecRefused(errFieldName) && slices.ContainsFunc(m.fields(), func(f [2]string) bool {
				return strings.Contains(f[0], " ") && strings.TrimLeft(f[0], " ") != ""
			})
		},
	},
	{
		name: "host", accepts: "net/http",
		reason: "HTTP/1.1 without Host, or a Host with a byte no host holds (RFC 9112 §3.2: 400); http.ReadRequest leaves both to net/http's server, which refuses them too",
		applies: func(m *message) bool {
			return m.codecRefused(errHostValue) && slices.ContainsFunc(m.headLines(), func(l []byte) bool {
				name, value, _ := bytes.Cut(bytes.TrimSuffix(l, []byte("\r")), []byte(":"))
				return strings.EqualFold(string(name), "Host") && !httpguts.ValidHostHeader(strings.Trim(string(value), " \t"))
			}) || m.codecRefused(errHost) && !m.hasField("Host")
		},
	},
	{
		name: "version", accepts: "net/http",
		reason: "a version other than HTTP/1.x: 505 for a request (net/http's server answers 505 too), 502 for a response (net/http's client accepts any HTTP/d.d)",
		applies: func(m *message) bool {
			v := m.startLine()
			if !m.response {
				v = v[strings.LastIndexByte(v, ' ')+1:]
			}
			return (m.codecRefused(errVersion) || m.codecRefused(errStatusLine)) && strings.HasPrefix(v, "HTTP/") && len(v) >= 8 && v[5] != '1'
		},
	},
	{
		name: "target-form", accepts: "net/http",
		reason: "the asterisk-form with another method than OPTIONS, CONNECT with an origin-form target (RFC 9112 §3.2.3, §3.2.4: invalid request lines), a fragment (no form has one)",
		applies: func(m *message) bool {
			method, target := m.target()
			return m.codecRefused(errRequestLine) && (target == "*" && method != "OPTIONS" ||
				method == "CONNECT" && strings.HasPrefix(target, "/") || strings.Contains(target, "#"))
		},
	},
	{
		name: "target-bytes", accepts: "net/http",
		reason: "a byte above 0x7E in the target (RFC 9112 §3.2 and RFC 3986: percent-encoded or absent); net/http passes it on",
		applies: func(m *message) bool {
			_, target := m.target()
			return m.codecRefused(errRequestLine) && strings.ContainsFunc(target, func(r rune) bool { return r > 0x7e })
		},
	},
	{
		name: "chunk-extension", accepts: "net/http",
		reason: "a chunk extension that is not ';' token ['=' token / quoted-string] (RFC 9112 §7.1.1), or holds control bytes; net/http drops whatever follows ';'",
		applies: func(m *message) bool {
			return m.codecRefused(errChunk) && slices.ContainsFunc(m.bodyLines(), func(l []byte) bool {
				size, ext, ok := bytes.Cut(bytes.TrimSuffix(l, []byte("\r")), []byte(";"))
				return ok && len(size) > 0 && isHex(size[0]) && !validChunkExt(append([]byte{';'}, ext...))
			})
		},
	},
	{
		name: "chunk-size-16-digits", accepts: "net/http",
		reason: "a chunk size of 16 hex digits (15 is the codec's bound, so that a size never overflows; net/http takes 16)",
		applies: func(m *message) bool {
			return m.codecRefused(errChunk) && slices.ContainsFunc(m.bodyLines(), func(l []byte) bool {
				return len(l) >= 16 && !slices.ContainsFunc(l[:16], func(c byte) bool { return !isHex(c) })
			})
		},
	},
	{
		name: "trailer-framing", accepts: "net/http",
		reason: "Content-Length or Transfer-Encoding in a trailer (RFC 9110 §6.5.1: not allowed there); refused rather than forwarded to a recipient that might merge it into the header",
		applies: func(m *message) bool {
			return m.codecRefused(errTrailerFraming) && slices.ContainsFunc(m.fields(), func(f [2]string) bool {
				return strings.EqualFold(f[0], "Content-Length") || strings.EqualFold(f[0], "Transfer-Encoding")
			})
		},
	},
	{
		name: "content-length-19-digits", accepts: "net/http",
		reason: "a Content-Length of more than 18 digits (the codec's bound against overflow; net/http takes up to 2^63-1, leading zeros included)",
		applies: func(m *message) bool {
			return m.codecRefused(errContentLength) && slices.ContainsFunc(m.headLines(), func(l []byte) bool {
				name, value, _ := bytes.Cut(l, []byte(":"))
				return strings.EqualFold(string(name), "Content-Length") && len(bytes.TrimSpace(value)) > 18
			})
		},
	},
	{
		name: "head-over-64k", accepts: "net/http",
		reason:  "a head over the codec's limit (64 KiB by default, 60 KiB as Portico configures it: 431, or 502 from an upstream); http.ReadRequest and ReadResponse have none of their own",
		applies: func(m *message) bool { return m.codecRefused(errHeadTooLarge) && len(m.in) > 64<<10 },
	},
	{
		name: "status-line", accepts: "net/http",
		reason: "a status line other than 'HTTP/1.x DDD reason' with single spaces, a status from 100 to 999 and no control byte in the reason; net/http takes spaces before the status, any three characters that read as a number (099, +20) and any reason",
		applies: func(m *message) bool {
			line := m.startLine()
			proto, status, _ := strings.Cut(line, " ")
			code, _, _ := strings.Cut(strings.TrimLeft(status, " "), " ")
			return m.response && m.codecRefused(errStatusLine) && strings.HasPrefix(proto, "HTTP/") &&
				(strings.HasPrefix(status, " ") || len(code) != 3 || code[0] < '1' || code[0] > '9' || !isDigit(code[1]) || !isDigit(code[2]) ||
					strings.ContainsFunc(line, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }))
		},
	},
	{
		name: "target-url", accepts: "codec",
		reason: "a target of the right form whose URL syntax is wrong: a '%' without two hex digits in the path, or an authority whose port is not digits or whose host holds a byte or bracket no host holds; the codec passes the target on as bytes, and the server refuses it when it builds Request.URL with url.ParseRequestURI (400), as net/http does",
		applies: func(m *message) bool {
			method, target := m.target()
			authority, path := "", target
			if method == "CONNECT" {
				authority, path = target, ""
			} else if _, rest, ok := strings.Cut(target, "://"); ok {
				authority, path, _ = strings.Cut(rest, "/")
				authority, _, _ = strings.Cut(authority, "?")
			}
			path, _, _ = strings.Cut(path, "?")
			hostport := authority[strings.LastIndexByte(authority, '@')+1:] // userinfo aside
			host, port := hostport, ""
			if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.Contains(hostport[i:], "]") {
				host, port = hostport[:i], hostport[i+1:]
			}
			return badEscape(path) || badEscape(host) || strings.Trim(port, "0123456789") != "" ||
				strings.ContainsAny(host, "[]") && (!strings.HasPrefix(host, "[") || !strings.HasSuffix(host, "]") || strings.Count(host, "[")+strings.Count(host, "]") != 2) ||
				strings.ContainsFunc(host, func(r rune) bool { return !strings.ContainsRune(urlHostBytes, r) })
		},
	},
	{
		name: "leading-empty-line", accepts: "codec",
		reason:  "one empty line before a request line (RFC 9112 §2.2: a server SHOULD ignore it; clients send one after a POST body); http.ReadRequest refuses it, net/http's server skips it after a POST",
		applies: func(m *message) bool { return !m.response && bytes.HasPrefix(m.in, []byte("\r\n")) },
	},
	{
		name: "chunk-extension-whitespace", accepts: "codec",
		reason: "whitespace between a chunk size and ';' (BWS, allowed by RFC 9112 §7.1.1); net/http reads it as part of the size",
		applies: func(m *message) bool {
			return slices.ContainsFunc(m.bodyLines(), func(l []byte) bool {
				size, _, ok := bytes.Cut(l, []byte(";"))
				trimmed := bytes.TrimRight(size, " \t")
				return ok && len(trimmed) < len(size) && len(trimmed) > 0 && !slices.ContainsFunc(trimmed, func(c byte) bool { return !isHex(c) })
			})
		},
	},
	{
		name: "content-length-same-number", accepts: "codec",
		reason: "repeated Content-Length fields with the same number written differently ('5' and '05'; RFC 9110 §8.6 lets a recipient use the one value); net/http compares their text",
		applies: func(m *message) bool {
			var values []string
			for _, l := range m.headLines() {
				if name, value, _ := bytes.Cut(l, []byte(":")); strings.EqualFold(string(name), "Content-Length") {
					values = append(values, string(bytes.TrimSpace(value)))
				}
			}
			return len(values) > 1 && slices.ContainsFunc(values, func(v string) bool { return v != values[0] })
		},
	},
	{
		name: "trailer-announces-framing", accepts: "codec",
		reason: "a chunked message whose Trailer field names Content-Length, Transfer-Encoding or Trailer: net/http refuses the message; the codec forwards the announcement and refuses such fields in the trailer itself",
		applies: func(m *message) bool {
			return m.codec != nil && slices.ContainsFunc(m.fields(), func(f [2]string) bool {
				return strings.EqualFold(f[0], "Trailer") && slices.ContainsFunc(strings.Split(f[1], ","), func(name string) bool {
					name = strings.TrimSpace(name)
					return strings.EqualFold(name, "Content-Length") || strings.EqualFold(name, "Transfer-Encoding") || strings.EqualFold(name, "Trailer")
				})
			})
		},
	},
	{
		name: "chunk-overhead", accepts: "codec",
		reason: "more than 16 KiB of chunk framing beyond 16 bytes and twice the data per chunk: net/http's bound against slow-drip bodies; the codec bounds each chunk-size line at 4 KiB, as net/http does, but not their sum",
		applies: func(m *message) bool {
			excess := 0
			for _, c := range m.chunks() {
				excess = max(excess+len(c.line)+2-16-2*c.size, 0)
				if excess > 16<<10 {
					return true
				}
			}
			return false
		},
	},
	{
		name: "trailer-over-4k", accepts: "codec",
		reason: "a trailer section longer than net/http's 4 KiB read buffer, its bound on trailers; the codec bounds it by the head limit",
		applies: func(m *message) bool {
			c := m.chunks()
			return len(c) > 0 && len(c[len(c)-1].trailer) > 4<<10
		},
	},
}

// appliesTo reports whether d covers m: the parser it says accepts does,
// and its predicate holds.
func (d *decision) appliesTo(m *message) bool {
	accepts := "both"
	switch {
	case m.codec == nil && m.netHTTP != nil:
		accepts = "net/http"
	case m.codec != nil && m.netHTTP == nil:
		accepts = "codec"
	}
	return d.accepts == accepts && d.applies(m)
}

// decide returns the decision that covers a message the two parsers read
// differently, nil if none does.
func decide(m *message) *decision {
	for i := range decisions {
		if d := &decisions[i]; d.appliesTo(m) {
			return d
		}
	}
	return nil
}

// read reads the message with both parsers, and returns net/http's error.
func (m *message) read(headRequest bool) error {
	var netErr error
	if m.response {
		m.codec, m.codecErr = codec.readResponse(m.in, headRequest)
		m.netHTTP, netErr = netHTTP.readResponse(m.in, headRequest)
	} else {
		m.codec, m.codecErr = codec.readRequest(m.in)
		m.netHTTP, netErr = netHTTP.readRequest(m.in)
	}
	return netErr
}

// differential reads in message by message with both parsers, and fails t
// at the first message they read differently that no decision covers.
func differential(t *testing.T, in []byte, response, headRequest bool) {
	t.Helper()
	for i, off := 0, 0; i < maxMessages && off < len(in); i++ {
		m := &message{in: in[off:], response: response}
		netErr := m.read(headRequest)
		if m.codecErr != nil && netErr != nil {
			return // both refuse (or the input ends): nothing is forwarded
		}
		if m.codecErr == nil && netErr == nil && !m.codec.differs(m.netHTTP) {
			if m.codec.close {
				return // nothing follows on the connection
			}
			off += m.codec.n
			continue
		}
		if d := decide(m); d != nil {
			return // a documented difference: what follows is read differently too
		}
		t.Fatalf("message %d (from byte %d of %q) is read differently and no decision covers it:\n codec:    %v (%v)\n net/http: %v (%v)",
			i, off, in, m.codec, m.codecErr, m.netHTTP, netErr)
	}
}

// fuzzSeeds adds the corpus's messages and a few of its own.
func fuzzSeeds(f *testing.F, corpus string, response bool, extra ...string) {
	cases, err := h1corpus.Load("../internal/h1corpus/testdata/" + corpus)
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		in := c.Send
		if response {
			in = c.Reply
			f.Add(in, bytes.HasPrefix(c.Send, []byte("HEAD ")))
			continue
		}
		f.Add(in, false)
	}
	for _, s := range extra {
		f.Add([]byte(s), false)
		if response {
			f.Add([]byte(s), true)
		}
	}
}

func FuzzRequestDifferential(f *testing.F) {
	fuzzSeeds(f, "requests.txt", false,
		"POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n5;a=\"b\"\r\nhello\r\n0\r\nX-T: 1\r\n\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET /a HTTP/1.0\r\nConnection: keep-alive\r\nPragma: no-cache\r\n\r\nGET /b HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n",
		"PUT http://h:80/a?b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabcOPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
		"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\nok",
	)
	f.Fuzz(func(t *testing.T, in []byte, _ bool) {
		differential(t, in, false, false)
	})
}

func FuzzResponseDifferential(f *testing.F) {
	fuzzSeeds(f, "responses.txt", true,
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3;x\r\nabc\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 204\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nConnection: keep-alive\r\n\r\nHTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\nConnection: close\r\n\r\nrest",
		"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nPragma: no-cache\r\n\r\nHTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nframes",
	)
	f.Fuzz(func(t *testing.T, in []byte, headRequest bool) {
		differential(t, in, true, headRequest)
	})
}

// decisionExamples are inputs each decision covers: every decision has one,
// so that none is dead and each predicate is seen to hold where it should.
var decisionExamples = []struct {
	decision string
	in       string
	response bool
}{
	{"bare-lf", "GET / HTTP/1.1\nHost: h\n\n", false},
	{"bare-lf", "HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n", true},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\n 2\r\n\r\n", false},
	{"obs-fold", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n 0\r\n\r\n", false},
	{"obs-fold", chunkedHead + "0\r\nA: 1\r\n\t2\r\n\r\n", false},
	{"te-and-cl", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false},
	{"te-and-cl", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", true},
	{"te-http10", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", false},
	{"te-http10", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nhello", true},
	{"space-in-field-name", "GET / HTTP/1.1\r\nHost: h\r\nA : 1\r\n\r\n", false},
	{"space-in-field-name", "HTTP/1.1 200 OK\r\nA B: 1\r\nContent-Length: 0\r\n\r\n", true},
	{"host", "GET / HTTP/1.1\r\n\r\n", false},
	{"host", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", false},
	{"version", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", false},
	{"version", "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", true},
	{"target-form", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"target-form", "CONNECT /a HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"target-form", "GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"target-bytes", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"chunk-extension", chunkedHead + "5;a=\"b\r\nhello\r\n0\r\n\r\n", false},
	{"chunk-extension", chunkedHead + "5;a=\x01\r\nhello\r\n0\r\n\r\n", false},
	{"chunk-size-16-digits", chunkedHead + "0000000000000005\r\nhello\r\n0\r\n\r\n", false},
	{"trailer-framing", chunkedHead + "0\r\nContent-Length: 5\r\n\r\n", false},
	{"trailer-framing", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nTransfer-Encoding: x\r\n\r\n", true},
	{"content-length-19-digits", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0000000000000000005\r\n\r\nhello", false},
	{"head-over-64k", "GET / HTTP/1.1\r\nHost: h\r\nA: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", false},
	{"status-line", "HTTP/1.1 099 X\r\nContent-Length: 0\r\n\r\n", true},
	{"status-line", "HTTP/1.1  200 OK\r\nContent-Length: 0\r\n\r\n", true},
	{"status-line", "HTTP/1.1 +20 OK\r\nContent-Length: 0\r\n\r\n", true},
	{"status-line", "HTTP/1.1 200 O\x01K\r\nContent-Length: 0\r\n\r\n", true},
	{"target-url", "GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"target-url", "GET http://h:x/ HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"target-url", "GET http://a{b/ HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"target-url", "GET http://[::1/ HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"target-url", "CONNECT %zz:1 HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"leading-empty-line", "\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", false},
	{"chunk-extension-whitespace", chunkedHead + "5 ;a\r\nhello\r\n0\r\n\r\n", false},
	{"content-length-same-number", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 05\r\n\r\nhello", false},
	{"trailer-announces-framing", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTrailer: X, Content-Length\r\n\r\n0\r\n\r\n", false},
	{"chunk-overhead", chunkedHead + strings.Repeat("1;"+strings.Repeat("a", 3000)+"\r\nx\r\n", 7) + "0\r\n\r\n", false},
	{"trailer-over-4k", chunkedHead + "0\r\nA: " + strings.Repeat("a", 5000) + "\r\n\r\n", false},
}

// TestDecisionExamples: each example is read differently by the two
// parsers, and its decision, and only that one, covers it.
func TestDecisionExamples(t *testing.T) {
	seen := map[string]bool{}
	for _, ex := range decisionExamples {
		seen[ex.decision] = true
		m := &message{in: []byte(ex.in), response: ex.response}
		netErr := m.read(false)
		if (m.codecErr == nil) == (netErr == nil) && (m.codecErr != nil || !m.codec.differs(m.netHTTP)) {
			t.Errorf("%s: %q is read alike (codec: %v; net/http: %v)", ex.decision, ex.in[:min(len(ex.in), 80)], m.codecErr, netErr)
			continue
		}
		var covering []string
		for _, d := range decisions {
			if d.appliesTo(m) {
				covering = append(covering, d.name)
			}
		}
		if !slices.Equal(covering, []string{ex.decision}) {
			t.Errorf("%s: %q is covered by %v (codec: %v; net/http: %v)", ex.decision, ex.in[:min(len(ex.in), 80)], covering, m.codecErr, netErr)
		}
	}
	for _, d := range decisions {
		if !seen[d.name] {
			t.Errorf("decision %s has no example", d.name)
		}
	}
}

// TestDecisionsDocumented: the decisions above are the table in
// docs/dev/http1-corpus.md, one row each, in the same order.
func TestDecisionsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/dev/http1-corpus.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for line := range strings.Lines(string(doc)) {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok = strings.Cut(name, "`"); ok {
				rows = append(rows, name)
			}
		}
	}
	var names []string
	for _, d := range decisions {
		names = append(names, d.name)
		row := fmt.Sprintf("| `%s` | %s | %s |", d.name, d.accepts, d.reason)
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/dev/http1-corpus.md has no row\n%s", row)
		}
	}
	if !slices.Equal(rows, names) {
		t.Errorf("the table's rows are %v, the decisions %v", rows, names)
	}
}
