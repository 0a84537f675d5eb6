package http1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

const (
	chunkedHead = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	lengthHead  = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n"
)

type bodyCase struct {
	name string
	head string // chunkedHead unless set
	body string
	// status is 200 for a body read to its end, an *Error's Status for one
	// refused, 0 when the input ends first (io.ErrUnexpectedEOF).
	status int
	want   string // the body's bytes (those read before the error, if any)
	// trailer is the trailer fields, as in Head.summary.
	trailer string
	rest    string
}

// readBody reads head and then its body from in, n bytes per Read.
func readBody(in string, n int, limits Limits) (body []byte, b *BodyReader, br *bufio.Reader, err error) {
	br = bufio.NewReaderSize(strings.NewReader(in), 16)
	var h Head
	if err := h.ReadRequest(br, limits); err != nil {
		return nil, nil, br, fmt.Errorf("head: %w", err)
	}
	b = new(BodyReader)
	b.Reset(br, &h)
	p := make([]byte, n)
	for {
		k, err := b.Read(p)
		body = append(body, p[:k]...)
		if err == io.EOF {
			return body, b, br, nil
		}
		if err != nil {
			return body, b, br, err
		}
	}
}

func (c bodyCase) run(t *testing.T, limits Limits) {
	head := c.head
	if head == "" {
		head = chunkedHead
	}
	// Read by one byte, by three (across chunk boundaries) and by 4 KiB.
	for _, n := range []int{1, 3, 4096} {
		got, b, br, err := readBody(head+c.body, n, limits)
		if status := statusOf(err); status != c.status {
			t.Fatalf("reads of %d: status %d (%v), want %d", n, status, err, c.status)
		}
		if string(got) != c.want {
			t.Errorf("reads of %d: body %q, want %q", n, got, c.want)
		}
		if err != nil {
			if b.Done() || b.Err() != err {
				t.Errorf("reads of %d: Done %v, Err %v after %v", n, b.Done(), b.Err(), err)
			}
			if k, again := b.Read(make([]byte, 8)); k != 0 || again != err {
				t.Errorf("reads of %d: a Read after %v returned %d, %v", n, err, k, again)
			}
			continue
		}
		if !b.Done() {
			t.Errorf("reads of %d: not Done at EOF", n)
		}
		if trailer := b.Trailer.fieldsSummary(); trailer != c.trailer {
			t.Errorf("reads of %d: trailer %q, want %q", n, trailer, c.trailer)
		}
		rest, _ := io.ReadAll(br)
		if string(rest) != c.rest {
			t.Errorf("reads of %d: left %q unread, want %q", n, rest, c.rest)
		}
	}
}

func TestBodyChunked(t *testing.T) {
	for _, c := range []bodyCase{
		{name: "one chunk", body: "5\r\nhello\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "chunks", body: "2\r\nhe\r\n1\r\nl\r\n2\r\nlo\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "hex digits both cases", body: "a\r\n0123456789\r\nB\r\n0123456789a\r\n0\r\n\r\n", status: 200, want: "01234567890123456789a"},
		{name: "leading zeros", body: "005\r\nhello\r\n000\r\n\r\n", status: 200, want: "hello"},
		{name: "15 hex digits", body: "000000000000005\r\nhello\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "empty body", body: "0\r\n\r\n", status: 200, want: ""},
		{name: "the next request stays", body: "0\r\n\r\nGET / HTTP/1.1\r\n", status: 200, want: "", rest: "GET / HTTP/1.1\r\n"},
		{name: "CRLF bytes in the data", body: "4\r\n\r\n\r\n\r\n0\r\n\r\n", status: 200, want: "\r\n\r\n"},

		// Extensions (RFC 9112 section 7.1.1): checked, then dropped.
		{name: "extension", body: "5;name=value\r\nhello\r\n0;last\r\n\r\n", status: 200, want: "hello"},
		{name: "extension without value", body: "5;a;b\r\nhello\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "extension quoted", body: "5;a=\"b c;d=\\\"e\\\"\"\r\nhello\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "extension with whitespace", body: "5 ; a = b\t;c\r\nhello\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "whitespace after the size", body: "5 \r\nhello\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "long extension", body: "5;" + strings.Repeat("a", 20000) + "\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension just under 4 KiB", body: "5;" + strings.Repeat("a", 4<<10-4) + "\r\nhello\r\n0\r\n\r\n", status: 200, want: "hello"},
		{name: "extension without name", body: "5;\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension =value", body: "5;=b\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension name=", body: "5;a=\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension unterminated quote", body: "5;a=\"val\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension quote then bytes", body: "5;a=\"v\"x\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension value with a space", body: "5;a=b c\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension NUL", body: "5;a=\x00\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension control byte in quotes", body: "5;a=\"\x01\"\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension bare CR", body: "5;a\rb\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension LF in quotes", body: "5;a=\"x\ny\"\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "extension after a space, no semicolon", body: "5 a\r\nhello\r\n0\r\n\r\n", status: 400},

		// Sizes (RFC 9112 section 7.1: 1*HEXDIG, no overflow).
		{name: "16 hex digits", body: "0000000000000005\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size overflow", body: "10000000000000005\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size 0x", body: "0x5\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size negative", body: "-5\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size plus", body: "+5\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size leading space", body: " 5\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size empty", body: "\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size not hex", body: "zz\r\nhello\r\n0\r\n\r\n", status: 400},
		{name: "size line of over 64 KiB", body: "5;" + strings.Repeat("a", 64<<10) + "\r\nhello\r\n0\r\n\r\n", status: 400},

		// Line ends and chunk data.
		{name: "bare LF after the size", body: "5\nhello\r\n0\r\n\r\n", status: 400},
		{name: "bare LF after the data", body: "5\r\nhello\n0\r\n\r\n", status: 400, want: "hello"},
		{name: "data longer than its size", body: "3\r\nhello\r\n0\r\n\r\n", status: 400, want: "hel"},
		{name: "data shorter than its size", body: "5\r\nhel\r\n0\r\n\r\n", status: 400, want: "hel\r\n"},
		{name: "bare LF after the last chunk", body: "5\r\nhello\r\n0\n\r\n", status: 400, want: "hello"},
		{name: "bare LF ending the trailer", body: "5\r\nhello\r\n0\r\n\n", status: 400, want: "hello"},

		// Trailers (RFC 9112 section 7.1.2, RFC 9110 section 6.5).
		{name: "trailer", body: "5\r\nhello\r\n0\r\nA: 1\r\nb: two \r\n\r\n", status: 200, want: "hello", trailer: ` | A="1" | b="two"`},
		{name: "trailer Host", body: "0\r\nHost: x\r\n\r\n", status: 200, trailer: ` | Host="x"`},
		{name: "trailer Content-Length", body: "5\r\nhello\r\n0\r\nContent-Length: 50\r\n\r\n", status: 400, want: "hello"},
		{name: "trailer Transfer-Encoding", body: "5\r\nhello\r\n0\r\ntransfer-encoding: chunked\r\n\r\n", status: 400, want: "hello"},
		{name: "trailer obs-fold", body: "0\r\nA: 1\r\n 2\r\n\r\n", status: 400},
		{name: "trailer space before colon", body: "0\r\nA : 1\r\n\r\n", status: 400},
		{name: "trailer NUL", body: "0\r\nA: \x00\r\n\r\n", status: 400},
		{name: "trailer bare LF", body: "0\r\nA: 1\n\r\n", status: 400},
		{name: "trailer then the next request", body: "0\r\nA: 1\r\n\r\nGET", status: 200, trailer: ` | A="1"`, rest: "GET"},

		// Cut short.
		{name: "nothing", body: "", status: 0},
		{name: "cut in the size line", body: "5", status: 0},
		{name: "cut in the data", body: "5\r\nhel", status: 0, want: "hel"},
		{name: "cut before the data's CRLF", body: "5\r\nhello", status: 0, want: "hello"},
		{name: "cut before the last chunk", body: "5\r\nhello\r\n", status: 0, want: "hello"},
		{name: "cut in the trailer", body: "5\r\nhello\r\n0\r\nA: 1\r\n", status: 0, want: "hello"},
		{name: "cut before the end of the trailer", body: "5\r\nhello\r\n0\r\n", status: 0, want: "hello"},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, Limits{}) })
	}
}

func TestBodyChunkedLimits(t *testing.T) {
	for _, c := range []bodyCase{
		{name: "trailer within the limit", body: "0\r\nA: " + strings.Repeat("a", 100-7-2) + "\r\n\r\n", status: 200, trailer: ` | A="` + strings.Repeat("a", 100-7-2) + `"`},
		{name: "trailer over the limit", body: "0\r\nA: " + strings.Repeat("a", 100) + "\r\n\r\n", status: 431},
		{name: "trailer fields over the limit", body: "0\r\nA: 1\r\nA: 2\r\nA: 3\r\nA: 4\r\n\r\n", status: 431},
		{name: "size line over 4 KiB, whatever the head limit", body: "5;" + strings.Repeat("a", 4<<10) + "\r\nhello\r\n0\r\n\r\n", status: 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.head = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
			c.run(t, Limits{MaxHeadBytes: 100, MaxFields: 3})
		})
	}
}

func TestBodyContentLength(t *testing.T) {
	for _, c := range []bodyCase{
		{name: "exact", body: "hello", status: 200, want: "hello"},
		{name: "the next request stays", body: "helloGET / HTTP/1.1\r\n", status: 200, want: "hello", rest: "GET / HTTP/1.1\r\n"},
		{name: "chunked-looking bytes are data", body: "0\r\n\r\nGET", status: 200, want: "0\r\n\r\n", rest: "GET"},
		{name: "cut", body: "hel", status: 0, want: "hel"},
		{name: "nothing", body: "", status: 0},
		{name: "zero", head: "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", body: "GET", status: 200, rest: "GET"},
		{name: "no framing: no body", head: "POST / HTTP/1.1\r\nHost: h\r\n\r\n", body: "hello", status: 200, rest: "hello"},
		{name: "HTTP/1.0 without framing: no body", head: "POST / HTTP/1.0\r\n\r\n", body: "hello", status: 200, rest: "hello"},
	} {
		if c.head == "" {
			c.head = lengthHead
		}
		t.Run(c.name, func(t *testing.T) { c.run(t, Limits{}) })
	}
}

// TestBodyReaderReuse: a BodyReader reset for the next message of a
// connection forgets the previous one's state and trailer.
func TestBodyReaderReuse(t *testing.T) {
	in := chunkedHead + "5\r\nhello\r\n0\r\nA: 1\r\n\r\n" + lengthHead + "world"
	br := bufio.NewReader(strings.NewReader(in))
	var h Head
	var b BodyReader
	for i, want := range []string{"hello", "world"} {
		if err := h.ReadRequest(br, Limits{}); err != nil {
			t.Fatal(err)
		}
		b.Reset(br, &h)
		got, err := io.ReadAll(&b)
		if err != nil || string(got) != want {
			t.Fatalf("body %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if b.Trailer.NumFields() != 0 {
		t.Errorf("the second body has the first one's trailer")
	}
}

func TestChunkedWriter(t *testing.T) {
	var out bytes.Buffer
	bw := bufio.NewWriter(&out)
	w := ChunkedWriter{W: bw}
	big := strings.Repeat("x", 5000)
	for _, p := range []string{"hello", "", big} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%d bytes) = %d, %v", len(p), n, err)
		}
	}
	_ = bw.Flush()
	if want := "5\r\nhello\r\n1388\r\n" + big + "\r\n"; out.String() != want {
		t.Fatalf("wrote %q, want %q", out.String(), want)
	}
	// What it writes reads back.
	got, _, _, err := readBody(chunkedHead+out.String()+"0\r\n\r\n", 4096, Limits{})
	if err != nil || string(got) != "hello"+big {
		t.Errorf("read back %d bytes, %v", len(got), err)
	}
}

// TestBodyResponse: a response's body as RFC 9112 section 6.3 frames it,
// the request's method and the status deciding first.
func TestBodyResponse(t *testing.T) {
	for _, c := range []struct {
		name, in    string
		headRequest bool
		body, rest  string
		untilEOF    bool
	}{
		{name: "length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP", body: "hello", rest: "HTTP"},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP", body: "hello", rest: "HTTP"},
		{name: "no framing: until the end", in: "HTTP/1.1 200 OK\r\n\r\nhello\r\n0\r\n\r\nHTTP", body: "hello\r\n0\r\n\r\nHTTP", untilEOF: true},
		{name: "HTTP/1.0 no framing", in: "HTTP/1.0 200 OK\r\n\r\nhello", body: "hello", untilEOF: true},
		{name: "HEAD with a length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP", headRequest: true, rest: "HTTP"},
		{name: "HEAD chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nHTTP", headRequest: true, rest: "HTTP"},
		{name: "HEAD no framing", in: "HTTP/1.1 200 OK\r\n\r\nHTTP", headRequest: true, rest: "HTTP"},
		{name: "204 with a length", in: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello", rest: "hello"},
		{name: "304 chunked", in: "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", rest: "0\r\n\r\n"},
		{name: "100", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", rest: "HTTP/1.1 200 OK\r\n"},
		{name: "1xx with a length", in: "HTTP/1.1 103 Early Hints\r\nContent-Length: 5\r\n\r\nhello", rest: "hello"},
		{name: "101", in: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nframes", rest: "frames"},
		{name: "205 with a length", in: "HTTP/1.1 205 Reset Content\r\nContent-Length: 2\r\n\r\nokHTTP", body: "ok", rest: "HTTP"},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(c.in), 16)
			var h Head
			if err := h.ReadResponse(br, Limits{}); err != nil {
				t.Fatal(err)
			}
			var b BodyReader
			b.ResetResponse(br, &h, c.headRequest)
			if b.UntilEOF() != c.untilEOF {
				t.Errorf("UntilEOF %v, want %v", b.UntilEOF(), c.untilEOF)
			}
			body, err := io.ReadAll(&b)
			if err != nil || string(body) != c.body {
				t.Fatalf("body %q, %v; want %q", body, err, c.body)
			}
			if !b.Done() {
				t.Errorf("not Done at EOF")
			}
			if rest, _ := io.ReadAll(br); string(rest) != c.rest {
				t.Errorf("left %q, want %q", rest, c.rest)
			}
		})
	}
}

// CheckBuffered refuses a chunked response whose first size line arrived
// broken with its head, and never waits for one that has not arrived, nor
// for the trailer of a last chunk.
func TestCheckBuffered(t *testing.T) {
	for _, c := range []struct {
		name, body string
		refused    bool
	}{
		{"broken size", "zz\r\nhello\r\n0\r\n\r\n", true},
		{"size too large", "10000000000000000\r\n", true},
		{"good size", "5\r\nhello\r\n0\r\n\r\n", false},
		{"line not whole yet", "5", false},
		{"last chunk, trailer to come", "0\r\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + c.body))
			var h Head
			if err := h.ReadResponse(br, Limits{}); err != nil {
				t.Fatal(err)
			}
			var b BodyReader
			b.ResetResponse(br, &h, false)
			if err := b.CheckBuffered(); (err != nil) != c.refused {
				t.Errorf("CheckBuffered = %v, refused %v", err, c.refused)
			}
			if !c.refused && c.name == "good size" {
				if got, _ := io.ReadAll(&b); string(got) != "hello" {
					t.Errorf("body after the check: %q", got)
				}
			}
		})
	}
}
