package http1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"unsafe"
)

var (
	errEOF           = io.EOF
	errUnexpectedEOF = io.ErrUnexpectedEOF
)

// Error is a message the codec refuses, with the status that says so to a
// client (a response from an upstream that is refused is a 502 to the client,
// whatever Status says).
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Reason) }

func badMessage(reason string) *Error { return &Error{400, reason} }

var (
	errHeadTooLarge  = &Error{431, "request header fields too large"}
	errBareLF        = badMessage("line ended by LF without CR")
	errObsFold       = badMessage("obsolete line folding")
	errFieldName     = badMessage("invalid header field name")
	errFieldValue    = badMessage("invalid header field value")
	errContentLength = badMessage("invalid or conflicting Content-Length")
	errTEAndCL       = badMessage("Transfer-Encoding together with Content-Length")
	errTE            = &Error{501, "unsupported Transfer-Encoding"}
	errTEList        = badMessage("malformed Transfer-Encoding")
	errTE10          = badMessage("Transfer-Encoding in an HTTP/1.0 message")
	errHost          = badMessage("missing or duplicate Host header")
	errHostValue     = badMessage("invalid Host header")
	errRequestLine   = badMessage("malformed request line")
	errVersion       = &Error{505, "HTTP version not supported"}
	errStatusLine    = &Error{502, "malformed status line"}
	errChunk         = badMessage("malformed chunked encoding")
	// RFC 9110 section 6.5.1: framing fields in a trailer could be merged
	// into the header section by the next recipient.
	errTrailerFraming = badMessage("Content-Length or Transfer-Encoding in a trailer")
)

// Limits bound what the codec reads of a message head.
type Limits struct {
	// MaxHeadBytes bounds the request or status line and the header fields,
	// line ends included; 0 means 64 KiB.
	MaxHeadBytes int
	// MaxFields bounds the number of header fields; 0 means no bound other
	// than MaxHeadBytes.
	MaxFields int
}

func (l Limits) headBytes() int {
	if l.MaxHeadBytes <= 0 {
		return 64 << 10
	}
	return l.MaxHeadBytes
}

// span is a range of Head.buf: offsets, not slices, as the buffer grows.
type span struct{ start, end int32 }

type field struct{ name, value span }

// Head is one parsed message head. It is reused from message to message of a
// connection, so that parsing allocates nothing once the connection is warm;
// what it returns aliases its buffer and is valid until the next read.
type Head struct {
	buf    []byte
	fields []field

	// The request line; for a response, target is the reason phrase.
	method, target span
	// Minor is the message's HTTP/1.x minor version (0 or 1).
	Minor  int
	Status int

	// ContentLength is -1 when the message has none.
	ContentLength int64
	Chunked       bool
	// Close says the sender ends the connection after this message.
	Close   bool
	Upgrade bool
	// Expect100 says the request asks for 100 Continue; ExpectOther that it
	// has an Expect other than 100-continue (answered 417).
	Expect100, ExpectOther bool
	hosts                  int
	closeListed            bool   // Connection lists close
	connection             []span // the Connection values, for the fields they name
	limits                 Limits
}

func (h *Head) reset(l Limits) {
	h.buf = h.buf[:0]
	h.fields = h.fields[:0]
	h.connection = h.connection[:0]
	h.Minor, h.Status, h.hosts = 1, 0, 0
	h.ContentLength, h.Chunked, h.Close, h.Upgrade = -1, false, false, false
	h.Expect100, h.ExpectOther, h.closeListed = false, false, false
	h.limits = l
}

// shrink lets go of buffers grown beyond max bytes by a large head.
func (h *Head) shrink(max int) {
	if cap(h.buf) > max {
		h.buf = nil
	}
	if cap(h.fields)*int(unsafe.Sizeof(field{})) > max {
		h.fields = nil
	}
	if cap(h.connection)*int(unsafe.Sizeof(span{})) > max {
		h.connection = nil
	}
}

func (h *Head) bytes(s span) []byte { return h.buf[s.start:s.end] }

// Method is the request's method.
func (h *Head) Method() []byte { return h.bytes(h.method) }

// Target is the request target, as sent.
func (h *Head) Target() []byte { return h.bytes(h.target) }

// Reason is a response's reason phrase.
func (h *Head) Reason() []byte { return h.bytes(h.target) }

// NumFields is the number of header fields, in the order received.
func (h *Head) NumFields() int { return len(h.fields) }

// Field returns the name and value of field i, the value without the
// whitespace around it.
func (h *Head) Field(i int) (name, value []byte) {
	f := h.fields[i]
	return h.bytes(f.name), h.bytes(f.value)
}

// readLine appends the next CRLF-terminated line to h.buf and returns its span
// without the CRLF.
func (h *Head) readLine(br *bufio.Reader) (span, error) {
	start := len(h.buf)
	max := h.limits.headBytes()
	for {
		chunk, err := br.ReadSlice('\n')
		if len(h.buf)+len(chunk) > max {
			return span{}, errHeadTooLarge
		}
		h.buf = append(h.buf, chunk...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			if len(h.buf) > start && err == errEOF {
				err = errUnexpectedEOF
			}
			return span{}, err
		}
	}
	end := len(h.buf) - 1
	if end == start || h.buf[end-1] != '\r' {
		return span{}, errBareLF
	}
	return span{int32(start), int32(end - 1)}, nil
}

// ReadRequest reads a request head. As RFC 9112 section 2.2 allows, one empty
// line before the request line is skipped (clients add one after a body).
func (h *Head) ReadRequest(br *bufio.Reader, l Limits) error {
	h.reset(l)
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
	if h.Minor == 1 && h.hosts != 1 || h.hosts > 1 {
		return errHost
	}
	return nil
}

func (h *Head) parseRequestLine(line []byte, off int32) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 || !isToken(line[:sp1]) {
		return errRequestLine
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return errRequestLine
	}
	minor, err := parseVersion(rest[sp2+1:])
	if err != nil {
		return err
	}
	if !validTarget(line[:sp1], rest[:sp2]) {
		return errRequestLine
	}
	h.Minor = minor
	h.Close = minor == 0
	h.method = span{off, off + int32(sp1)}
	h.target = span{off + int32(sp1) + 1, off + int32(sp1+1+sp2)}
	return nil
}

// validTarget checks a request target's bytes and form (RFC 9112 section
// 3.2): visible ASCII without "#" (a fragment is not part of any form, and
// two recipients could disagree on where the target ends), the asterisk-form
// only for OPTIONS, the authority-form for CONNECT and only for it, otherwise
// the origin-form ("/...") or the absolute-form ("scheme:...").
func validTarget(method, target []byte) bool {
	for _, c := range target {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	switch {
	case string(method) == "CONNECT":
		return validAuthority(target)
	case target[0] == '/':
		return true
	case len(target) == 1 && target[0] == '*':
		return string(method) == "OPTIONS"
	}
	return hasScheme(target)
}

// hasScheme reports whether target starts with a URI scheme and its colon
// (RFC 3986 section 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )).
func hasScheme(target []byte) bool {
	for i, c := range target {
		switch {
		case 'a' <= lower(c) && lower(c) <= 'z':
		case i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return true
		default:
			return false
		}
	}
	return false
}

// validAuthority checks CONNECT's authority-form: uri-host ":" port.
func validAuthority(target []byte) bool {
	colon := bytes.LastIndexByte(target, ':')
	if colon <= 0 || !validHost(target[:colon]) {
		return false
	}
	for _, c := range target[colon+1:] {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

// validHost checks that a Host value (or CONNECT's authority) holds only
// bytes a uri-host and port can hold (RFC 3986 section 3.2.2: unreserved,
// pct-encoded, sub-delims, IP literals in brackets, ":" before the port); no
// "/", "@", "?", whitespace or control bytes. As lenient as net/http's
// server, whose check it replaces.
func validHost(v []byte) bool {
	for _, c := range v {
		if !hostByte[c] {
			return false
		}
	}
	return true
}

var hostByte = alnumAnd("-._~!$&'()*+,;=%:[]")

// parseVersion reads "HTTP/1.x" and returns its minor version; another
// well-formed version is a 505, anything else a malformed line. A minor
// version above 1 is read as 1: RFC 9110 section 6.2 has a recipient process
// a higher minor version of a major version it implements as the highest one
// it conforms to (net/http does too).
func parseVersion(v []byte) (int, error) {
	if len(v) != 8 || string(v[:5]) != "HTTP/" || v[6] != '.' || !isDigit(v[5]) || !isDigit(v[7]) {
		return 0, errRequestLine
	}
	if v[5] != '1' {
		return 0, errVersion
	}
	return min(int(v[7]-'0'), 1), nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// ReadResponse reads a response head from an upstream.
func (h *Head) ReadResponse(br *bufio.Reader, l Limits) error {
	h.reset(l)
	line, err := h.readLine(br)
	if err != nil {
		return err
	}
	b := h.bytes(line)
	if len(b) < 12 || (len(b) > 12 && b[12] != ' ') || b[8] != ' ' {
		return errStatusLine
	}
	minor, err := parseVersion(b[:8])
	if err != nil {
		return errStatusLine
	}
	h.Minor, h.Close = minor, minor == 0
	for _, c := range b[9:12] {
		if !isDigit(c) {
			return errStatusLine
		}
		h.Status = h.Status*10 + int(c-'0')
	}
	if h.Status < 100 {
		return errStatusLine
	}
	h.target = span{line.start + 12, line.end}
	if len(b) > 12 {
		h.target.start++
	}
	for _, c := range h.bytes(h.target) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return errStatusLine
		}
	}
	return h.readFields(br)
}

// ReadTrailer reads the trailer section of a chunked body: fields up to an
// empty line, with the framing fields (Content-Length, Transfer-Encoding)
// refused, as a trailer must not carry them.
func (h *Head) ReadTrailer(br *bufio.Reader, l Limits) error {
	h.reset(l)
	for {
		line, err := h.readLine(br)
		if err != nil {
			return err
		}
		if line.start == line.end {
			return nil
		}
		if h.limits.MaxFields > 0 && len(h.fields) == h.limits.MaxFields {
			return errHeadTooLarge
		}
		f, err := h.parseField(line)
		if err != nil {
			return err
		}
		if name := h.bytes(f.name); equalFold(name, "Content-Length") || equalFold(name, "Transfer-Encoding") {
			return errTrailerFraming
		}
		h.fields = append(h.fields, f)
	}
}

func (h *Head) readFields(br *bufio.Reader) error {
	for {
		line, err := h.readLine(br)
		if err != nil {
			return err
		}
		if line.start == line.end {
			if h.Chunked && h.ContentLength >= 0 {
				return errTEAndCL
			}
			return nil
		}
		if h.limits.MaxFields > 0 && len(h.fields) == h.limits.MaxFields {
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

func (h *Head) parseField(line span) (field, error) {
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

// interpret records what a field means for the message's framing and
// connection.
func (h *Head) interpret(f field) error {
	name, value := h.bytes(f.name), h.bytes(f.value)
	switch len(name) {
	case 4:
		if equalFold(name, "Host") {
			if !validHost(value) {
				return errHostValue
			}
			h.hosts++
		}
	case 6:
		if equalFold(name, "Expect") {
			if equalFold(value, "100-continue") {
				// RFC 9110 section 10.1.1: a server MUST ignore 100-continue
				// in an HTTP/1.0 request (a 1.0 client would not expect a 100).
				h.Expect100 = h.Minor == 1
			} else {
				h.ExpectOther = true
			}
		}
	case 7:
		if equalFold(name, "Upgrade") {
			h.Upgrade = true
		}
	case 10:
		if equalFold(name, "Connection") {
			h.connection = append(h.connection, f.value)
			// close wins over keep-alive, in whichever order they come.
			forEachToken(value, func(tok []byte) {
				switch {
				case equalFold(tok, "close"):
					h.Close, h.closeListed = true, true
				case equalFold(tok, "keep-alive") && h.Minor == 0 && !h.closeListed:
					h.Close = false
				}
			})
		}
	case 14:
		if equalFold(name, "Content-Length") {
			n, ok := parseLength(value)
			if !ok || (h.ContentLength >= 0 && h.ContentLength != n) {
				return errContentLength
			}
			h.ContentLength = n
		}
	case 17:
		if equalFold(name, "Transfer-Encoding") {
			// RFC 9112 section 6.1: chunked must be the last coding, and a
			// proxy that cannot decode the others cannot frame the message.
			// Anything but one "chunked" is refused: a list with an empty
			// element (", chunked") or no element as malformed (400), other
			// codings as not implemented (501). In HTTP/1.0, which has no
			// Transfer-Encoding, the framing is faulty (400).
			switch {
			case h.Minor == 0:
				return errTE10
			case h.Chunked || !equalFold(value, "chunked"):
				if malformedList(value) {
					return errTEList
				}
				return errTE
			}
			h.Chunked = true
		}
	}
	return nil
}

// ConnectionNames reports whether name is listed in a Connection field (and
// so hop-by-hop).
func (h *Head) ConnectionNames(name []byte) bool {
	for _, c := range h.connection {
		listed := false
		forEachToken(h.bytes(c), func(tok []byte) { listed = listed || bytes.EqualFold(tok, name) })
		if listed {
			return true
		}
	}
	return false
}

// parseLength reads a Content-Length: digits only (no sign, no spaces, no
// list), at most 18 of them so that it cannot overflow.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// malformedList reports whether a field value is not a list of elements
// separated by commas: empty, or with an empty element.
func malformedList(v []byte) bool {
	for {
		elem, rest, more := bytes.Cut(v, []byte(","))
		if len(bytes.Trim(elem, " \t")) == 0 {
			return true
		}
		if !more {
			return false
		}
		v = rest
	}
}

func forEachToken(list []byte, fn func([]byte)) {
	for len(list) > 0 {
		var tok []byte
		tok, list, _ = bytes.Cut(list, []byte(","))
		if tok = bytes.Trim(tok, " \t"); len(tok) > 0 {
			fn(tok)
		}
	}
}

// equalFold compares ASCII case-insensitively without converting s.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// tchar per RFC 9110 section 5.6.2.
var tchar = alnumAnd("!#$%&'*+-.^_`|~")

// alnumAnd is the set of ASCII letters, digits and the bytes of extra.
func alnumAnd(extra string) (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range extra {
		t[c] = true
	}
	return t
}

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
