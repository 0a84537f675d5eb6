package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
)

// The raw side's HTTP/1.1 message head parser: RFC 9112 read strictly, for a proxy.
// Everything that two parsers could read two ways (the ground of request smuggling) is
// refused rather than repaired: bare LF, obs-fold, whitespace before a colon, control
// bytes, a Transfer-Encoding other than one "chunked", Transfer-Encoding with
// Content-Length, Content-Length values that disagree or are not plain digits.

const (
	maxHeadBytes = 60 << 10 // the request head limit Portico documents
	maxFields    = 100
)

// codecError is a message the codec refuses, with the status that says so.
type codecError struct {
	status int
	reason string
}

func (e *codecError) Error() string { return fmt.Sprintf("%d: %s", e.status, e.reason) }

func badMessage(reason string) error { return &codecError{400, reason} }

var (
	errHeadTooLarge  = &codecError{431, "head larger than 60 KiB or more than 100 fields"}
	errBareLF        = badMessage("line ended by LF without CR")
	errObsFold       = badMessage("obsolete line folding")
	errFieldName     = badMessage("invalid field name (no token, or whitespace before the colon)")
	errFieldValue    = badMessage("control byte in a field value")
	errContentLength = badMessage("invalid or conflicting Content-Length")
	errTEAndCL       = badMessage("Transfer-Encoding together with Content-Length")
	errTE            = &codecError{501, "Transfer-Encoding other than a single chunked"}
	errHost          = badMessage("an HTTP/1.1 request needs exactly one Host")
	errRequestLine   = badMessage("malformed request line")
	errStatusLine    = errors.New("malformed status line from the upstream")
	errChunk         = badMessage("malformed chunk")
)

// span is a range of head.buf: slices into a buffer that grows would go stale.
type span struct{ start, end int32 }

type field struct{ name, value span }

// head is one parsed message head, reused from message to message of a connection
// so that parsing allocates nothing once the connection has warmed up.
type head struct {
	buf    []byte
	fields []field

	// Request line, or status line (method unused, target the reason phrase).
	method, target span
	http10         bool
	status         int

	contentLength int64 // -1: none
	chunked       bool
	close         bool // the sender's last message on this connection
	upgrade       bool
	hosts         int
	connection    []span // the Connection values, for the fields they name
}

func (h *head) reset() {
	h.buf = h.buf[:0]
	h.fields = h.fields[:0]
	h.connection = h.connection[:0]
	h.http10, h.status = false, 0
	h.contentLength, h.chunked, h.close, h.upgrade, h.hosts = -1, false, false, false, 0
}

func (h *head) bytes(s span) []byte { return h.buf[s.start:s.end] }

// readLine appends the next CRLF-terminated line to h.buf and returns its span
// without the CRLF.
func (h *head) readLine(br *bufio.Reader) (span, error) {
	start := len(h.buf)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(h.buf)+len(chunk) > maxHeadBytes {
			return span{}, errHeadTooLarge
		}
		h.buf = append(h.buf, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return span{}, err
		}
	}
	end := len(h.buf) - 1
	if end == start || h.buf[end-1] != '\r' {
		return span{}, errBareLF
	}
	return span{int32(start), int32(end - 1)}, nil
}

// readRequest reads a request head. RFC 9112 section 2.2 lets a server skip empty
// lines before the request line; one is skipped, as clients add it after a body.
func (h *head) readRequest(br *bufio.Reader) error {
	h.reset()
	line, err := h.readLine(br)
	if err == nil && line.start == line.end {
		h.buf = h.buf[:0]
		line, err = h.readLine(br)
	}
	if err != nil {
		return err
	}
	if err := h.parseRequestLine(h.bytes(line), line.start); err != nil {
		return err
	}
	if err := h.readFields(br); err != nil {
		return err
	}
	if !h.http10 && h.hosts != 1 {
		return errHost
	}
	return nil
}

func (h *head) parseRequestLine(line []byte, off int32) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 || !isToken(line[:sp1]) {
		return errRequestLine
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return errRequestLine
	}
	for _, c := range rest[:sp2] {
		if c <= ' ' || c == 0x7f {
			return errRequestLine
		}
	}
	switch string(rest[sp2+1:]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		h.http10, h.close = true, true
	default:
		return errRequestLine
	}
	h.method = span{off, off + int32(sp1)}
	h.target = span{off + int32(sp1) + 1, off + int32(sp1+1+sp2)}
	return nil
}

// readResponse reads a response head from an upstream.
func (h *head) readResponse(br *bufio.Reader) error {
	h.reset()
	line, err := h.readLine(br)
	if err != nil {
		return err
	}
	l := h.bytes(line)
	if len(l) < 12 || l[8] != ' ' || (len(l) > 12 && l[12] != ' ') {
		return errStatusLine
	}
	switch string(l[:8]) {
	case "HTTP/1.1":
	case "HTTP/1.0":
		h.http10, h.close = true, true
	default:
		return errStatusLine
	}
	for _, c := range l[9:12] {
		if c < '0' || c > '9' {
			return errStatusLine
		}
		h.status = h.status*10 + int(c-'0')
	}
	h.target = span{line.start + 12, line.end}
	if len(l) > 12 {
		h.target.start++
	}
	if err := h.readFields(br); err != nil {
		return err
	}
	return nil
}

func (h *head) readFields(br *bufio.Reader) error {
	for {
		line, err := h.readLine(br)
		if err != nil {
			return err
		}
		if line.start == line.end {
			if h.chunked && h.contentLength >= 0 {
				return errTEAndCL
			}
			return nil
		}
		if len(h.fields) == maxFields {
			return errHeadTooLarge
		}
		f, err := h.parseField(line)
		if err != nil {
			return err
		}
		h.fields = append(h.fields, f)
		if err := h.interpret(f); err != nil {
			return err
		}
	}
}

func (h *head) parseField(line span) (field, error) {
	l := h.bytes(line)
	if l[0] == ' ' || l[0] == '\t' {
		return field{}, errObsFold
	}
	colon := bytes.IndexByte(l, ':')
	if colon <= 0 || !isToken(l[:colon]) {
		return field{}, errFieldName
	}
	vs, ve := colon+1, len(l)
	for vs < ve && (l[vs] == ' ' || l[vs] == '\t') {
		vs++
	}
	for ve > vs && (l[ve-1] == ' ' || l[ve-1] == '\t') {
		ve--
	}
	for _, c := range l[vs:ve] {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return field{}, errFieldValue
		}
	}
	return field{
		name:  span{line.start, line.start + int32(colon)},
		value: span{line.start + int32(vs), line.start + int32(ve)},
	}, nil
}

// interpret records what a field means for the message's framing and connection.
func (h *head) interpret(f field) error {
	name, value := h.bytes(f.name), h.bytes(f.value)
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		n, ok := parseLength(value)
		if !ok || (h.contentLength >= 0 && h.contentLength != n) {
			return errContentLength
		}
		h.contentLength = n
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		if h.chunked || !bytes.EqualFold(value, []byte("chunked")) || h.http10 {
			return errTE
		}
		h.chunked = true
	case bytes.EqualFold(name, []byte("Host")):
		h.hosts++
	case bytes.EqualFold(name, []byte("Connection")):
		h.connection = append(h.connection, f.value)
		forEachToken(value, func(tok []byte) {
			switch {
			case bytes.EqualFold(tok, []byte("close")):
				h.close = true
			case bytes.EqualFold(tok, []byte("keep-alive")) && h.http10:
				h.close = false
			}
		})
	case bytes.EqualFold(name, []byte("Upgrade")):
		h.upgrade = true
	}
	return nil
}

// parseLength reads a Content-Length: digits only (no sign, no spaces, no list),
// at most 18 of them so that it cannot overflow.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// hopByHopNames are not forwarded (RFC 9110 section 7.6.1), nor are the framing
// headers, which the proxy writes for itself.
var hopByHopNames = [][]byte{
	[]byte("Connection"), []byte("Keep-Alive"), []byte("Proxy-Connection"), []byte("TE"),
	[]byte("Trailer"), []byte("Transfer-Encoding"), []byte("Upgrade"), []byte("Content-Length"),
}

// forwarded reports whether f goes on to the next hop: not hop-by-hop, not named by
// a Connection field.
func (h *head) forwarded(f field) bool {
	name := h.bytes(f.name)
	for _, hop := range hopByHopNames {
		if bytes.EqualFold(name, hop) {
			return false
		}
	}
	for _, c := range h.connection {
		listed := false
		forEachToken(h.bytes(c), func(tok []byte) { listed = listed || bytes.EqualFold(tok, name) })
		if listed {
			return false
		}
	}
	return true
}

func forEachToken(list []byte, fn func([]byte)) {
	for len(list) > 0 {
		var tok []byte
		tok, list, _ = bytes.Cut(list, []byte(","))
		fn(bytes.Trim(tok, " \t"))
	}
}

// tchar per RFC 9110 section 5.6.2.
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tchar[c] {
			return false
		}
	}
	return true
}
