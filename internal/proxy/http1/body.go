package http1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
)

// chunkSize parses a chunk-size line (RFC 9112 section 7.1): 1 to 15 hex
// digits, then optional whitespace and extensions, which are dropped but
// must be well-formed (an unterminated quoted-string could be read by the
// next recipient as swallowing the line end).
func chunkSize(line []byte) (int64, error) {
	var n int64
	i := 0
	for ; i < len(line) && i < 16; i++ {
		d, ok := hexDigit(line[i])
		if !ok {
			break
		}
		n = n<<4 | int64(d)
	}
	if i == 0 || i > 15 {
		return 0, errChunk
	}
	if !validChunkExt(line[i:]) {
		return 0, errChunk
	}
	return n, nil
}

// validChunkExt checks what follows a chunk size (RFC 9112 section 7.1.1):
// *( BWS ";" BWS name [ BWS "=" BWS value ] ), the name a token, the value a
// token or a quoted-string. Whitespace at the end is let through, as after a
// size without extensions.
func validChunkExt(ext []byte) bool {
	for {
		if ext = skipOWS(ext); len(ext) == 0 {
			return true
		}
		if ext[0] != ';' {
			return false
		}
		ext = skipOWS(ext[1:])
		n := tokenLen(ext)
		if n == 0 {
			return false
		}
		ext = skipOWS(ext[n:])
		if len(ext) == 0 || ext[0] != '=' {
			continue
		}
		ext = skipOWS(ext[1:])
		if n = tokenLen(ext); n == 0 {
			n = quotedLen(ext)
		}
		if n == 0 {
			return false
		}
		ext = ext[n:]
	}
}

func skipOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func tokenLen(b []byte) int {
	n := 0
	for n < len(b) && tchar[b[n]] {
		n++
	}
	return n
}

// quotedLen is the length of the quoted-string b starts with (RFC 9110
// section 5.6.4), 0 if it does not start with a complete one.
func quotedLen(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return 0
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i++; i == len(b) || !quotable(b[i]) {
				return 0
			}
		case !quotable(c):
			return 0
		}
	}
	return 0
}

// quotable: HTAB, SP, visible ASCII and obs-text.
func quotable(c byte) bool { return c == '\t' || (c >= ' ' && c != 0x7f) }

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// BodyReader reads a message body as its head frames it: Content-Length
// bytes, or chunks (their framing checked, extensions dropped), ending in the
// trailer fields. A framing error is an *Error (the message is refused); a
// body cut short is io.ErrUnexpectedEOF. It is reused from message to message.
type BodyReader struct {
	br        *bufio.Reader
	remaining int64 // of the body (Content-Length) or of the current chunk
	chunked   bool
	inChunk   bool // chunked: remaining counts the current chunk's data
	untilEOF  bool // a response without framing: the body ends with the connection
	done      bool
	err       error
	// Trailer is the chunked body's trailer section once Read returned EOF.
	Trailer Head
	line    Head // chunk-size lines
	limits  Limits
}

// Reset points the reader at the body head announces, read from br.
func (b *BodyReader) Reset(br *bufio.Reader, head *Head) {
	b.br, b.chunked, b.inChunk, b.untilEOF, b.err = br, head.Chunked, false, false, nil
	b.limits = head.limits
	b.Trailer.reset(head.limits)
	b.remaining = max(head.ContentLength, 0)
	b.done = !b.chunked && b.remaining == 0
}

// ResetResponse points the reader at the body of a response (RFC 9112
// section 6.3): none after a HEAD request and for 1xx, 204 and 304, whatever
// the head says; otherwise as the head frames it, and without framing, all
// bytes up to the end of the connection.
func (b *BodyReader) ResetResponse(br *bufio.Reader, head *Head, headRequest bool) {
	b.Reset(br, head)
	switch {
	case headRequest || head.Status < 200 || head.Status == 204 || head.Status == 304:
		b.chunked, b.done = false, true
	case !head.Chunked && head.ContentLength < 0:
		b.untilEOF, b.done = true, false
	}
}

// CheckBuffered reads a chunked body's first chunk-size line if it arrived
// with the head (it never waits for the connection), so that a body whose
// framing is broken from its first byte is refused before its head is passed
// on. The error is the *Error a Read would return.
func (b *BodyReader) CheckBuffered() *Error {
	if !b.chunked || b.inChunk || b.done || b.err != nil {
		return nil
	}
	buffered, _ := b.br.Peek(b.br.Buffered())
	end := bytes.IndexByte(buffered, '\n')
	if end < 0 {
		return nil
	}
	if size, err := chunkSize(bytes.TrimSuffix(buffered[:end], []byte("\r"))); err == nil && size == 0 {
		return nil // the last chunk: its trailer may still be on its way
	}
	if err := b.nextChunk(); err != nil {
		b.err = err
		var e *Error
		if errors.As(err, &e) {
			return e
		}
	}
	return nil
}

// UntilEOF reports whether the body ends with the connection (a response
// without framing): the connection cannot carry another message.
func (b *BodyReader) UntilEOF() bool { return b.untilEOF }

// Done reports whether the whole body (and its trailer) has been read.
func (b *BodyReader) Done() bool { return b.done }

// Err is the error that ended the body early, nil if none.
func (b *BodyReader) Err() error { return b.err }

func (b *BodyReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if b.untilEOF {
		n, err := b.br.Read(p)
		if err == io.EOF {
			b.done = true
		} else if err != nil {
			b.err = err
		}
		return n, err
	}
	if b.chunked && !b.inChunk {
		if err := b.nextChunk(); err != nil {
			b.err = err
			return 0, err
		}
		if b.done {
			return 0, io.EOF
		}
	}
	n, err := b.br.Read(p[:min(int64(len(p)), b.remaining)])
	b.remaining -= int64(n)
	if b.remaining == 0 {
		if !b.chunked {
			b.done = true
		} else if err = b.endChunk(); err != nil {
			b.err = err
			return n, err
		}
	} else if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		b.err = err
		return n, err
	}
	if b.done && n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// nextChunk reads a chunk-size line; after the last chunk, the trailer.
func (b *BodyReader) nextChunk() error {
	b.line.reset(Limits{MaxHeadBytes: maxChunkLine})
	line, err := b.line.readLine(b.br)
	if err == errHeadTooLarge {
		return errChunkLine
	}
	if err != nil {
		return noEOF(err)
	}
	size, err := chunkSize(b.line.bytes(line))
	if err != nil {
		return err
	}
	if size > 0 {
		b.remaining, b.inChunk = size, true
		return nil
	}
	if err := b.Trailer.ReadTrailer(b.br, b.limits); err != nil {
		return noEOF(err)
	}
	b.done = true
	return nil
}

// maxChunkLine bounds a chunk-size line, extensions included (RFC 9112
// section 7.1.1 asks a recipient to limit them; net/http's bound is the same).
const maxChunkLine = 4 << 10

var errChunkLine = badMessage("chunk extensions too long")

// endChunk checks the CRLF after a chunk's data.
func (b *BodyReader) endChunk() error {
	b.inChunk = false
	crlf, err := b.br.Peek(2)
	if err != nil {
		return noEOF(err)
	}
	if crlf[0] != '\r' || crlf[1] != '\n' {
		return errChunk
	}
	_, _ = b.br.Discard(2)
	return nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ChunkedWriter frames what is written to it as chunks on W; the last chunk
// and the trailer fields are the server's (response.writeTrailers).
type ChunkedWriter struct {
	W *bufio.Writer
}

func (c ChunkedWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	w := c.W
	_, _ = w.Write(strconv.AppendInt(w.AvailableBuffer(), int64(len(p)), 16))
	_, _ = w.WriteString("\r\n")
	n, err := w.Write(p)
	if err != nil {
		return n, err
	}
	_, err = w.WriteString("\r\n")
	return n, err
}
