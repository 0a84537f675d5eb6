package http1

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// summary is what a parsed request head means to the proxy, in one line:
// the request line, the framing and connection flags, then every field as
// received.
func (h *Head) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s 1.%d", h.Method(), h.Target(), h.Minor)
	if h.Status != 0 {
		b.Reset()
		fmt.Fprintf(&b, "1.%d %d %q", h.Minor, h.Status, h.Reason())
	}
	if h.ContentLength >= 0 {
		fmt.Fprintf(&b, " length=%d", h.ContentLength)
	}
	for _, flag := range []struct {
		on   bool
		name string
	}{{h.Chunked, "chunked"}, {h.Close, "close"}, {h.Upgrade, "upgrade"}, {h.Expect100, "expect100"}, {h.ExpectOther, "expect-other"}} {
		if flag.on {
			b.WriteString(" " + flag.name)
		}
	}
	return b.String() + h.fieldsSummary()
}

// fieldsSummary is the fields of a head (or trailer), as received.
func (h *Head) fieldsSummary() string {
	var b strings.Builder
	for i := range h.NumFields() {
		name, value := h.Field(i)
		fmt.Fprintf(&b, " | %s=%q", name, value)
	}
	return b.String()
}

// statusOf is the status an error from the codec answers with: an *Error's
// Status, 0 for an end of input, -1 for anything else (never expected).
func statusOf(err error) int {
	var e *Error
	switch {
	case err == nil:
		return 200
	case errors.As(err, &e):
		return e.Status
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return 0
	}
	return -1
}

type headCase struct {
	name string
	in   string
	// status is 200 for a head read, an *Error's Status for one refused, 0
	// when the input ends before the head does.
	status int
	// want is the head's summary when read.
	want string
	// rest is what the reader still holds after the head (default: nothing).
	rest string
}

func runHeadCases(t *testing.T, cases []headCase, limits Limits, read func(*Head, *bufio.Reader, Limits) error) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
			var h Head
			err := read(&h, br, limits)
			if got := statusOf(err); got != tc.status {
				t.Fatalf("status %d (%v), want %d", got, err, tc.status)
			}
			if err != nil {
				return
			}
			if got := h.summary(); got != tc.want {
				t.Errorf("head\n got %s\nwant %s", got, tc.want)
			}
			rest, _ := io.ReadAll(br)
			if string(rest) != tc.rest {
				t.Errorf("left %q unread, want %q", rest, tc.rest)
			}
		})
	}
}

const host = "Host: h\r\n"

func TestReadRequest(t *testing.T) {
	runHeadCases(t, []headCase{
		{name: "get", in: "GET /a?b=c HTTP/1.1\r\n" + host + "\r\n", status: 200,
			want: `GET /a?b=c 1.1 | Host="h"`},
		{name: "leading empty line skipped", in: "\r\nGET / HTTP/1.1\r\n" + host + "\r\n", status: 200,
			want: `GET / 1.1 | Host="h"`},
		{name: "two leading empty lines", in: "\r\n\r\nGET / HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "pipelined: the next request stays", in: "GET / HTTP/1.1\r\n" + host + "\r\nGET /b HTTP/1.1\r\n", status: 200,
			want: `GET / 1.1 | Host="h"`, rest: "GET /b HTTP/1.1\r\n"},
		{name: "value whitespace trimmed, inner kept", in: "GET / HTTP/1.1\r\n" + host + "A: \t x  y \t\r\nB:\r\n\r\n", status: 200,
			want: `GET / 1.1 | Host="h" | A="x  y" | B=""`},
		{name: "names as sent", in: "GET / HTTP/1.1\r\nhOST: h\r\nx-Y_z: 1\r\n\r\n", status: 200,
			want: `GET / 1.1 | hOST="h" | x-Y_z="1"`},
		{name: "obs-text in a value", in: "GET / HTTP/1.1\r\n" + host + "A: caf\xe9\r\n\r\n", status: 200,
			want: `GET / 1.1 | Host="h" | A="caf\xe9"`},

		// Framing: Content-Length and Transfer-Encoding (RFC 9112 section 6).
		{name: "content-length", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\n\r\nhello", status: 200,
			want: `POST / 1.1 length=5 | Host="h" | Content-Length="5"`, rest: "hello"},
		{name: "content-length zero", in: "POST / HTTP/1.1\r\n" + host + "content-length: 0\r\n\r\n", status: 200,
			want: `POST / 1.1 length=0 | Host="h" | content-length="0"`},
		{name: "content-length 18 digits", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 999999999999999999\r\n\r\n", status: 200,
			want: `POST / 1.1 length=999999999999999999 | Host="h" | Content-Length="999999999999999999"`},
		{name: "content-length 19 digits", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 1000000000000000000\r\n\r\n", status: 400},
		{name: "content-length duplicate same", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nContent-Length: 5\r\n\r\n", status: 200,
			want: `POST / 1.1 length=5 | Host="h" | Content-Length="5" | Content-Length="5"`},
		{name: "content-length duplicate differ", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", status: 400},
		{name: "content-length list", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 5, 5\r\n\r\n", status: 400},
		{name: "content-length negative", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", status: 400},
		{name: "content-length plus", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: +5\r\n\r\n", status: 400},
		{name: "content-length hex", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 0x5\r\n\r\n", status: 400},
		{name: "content-length inner space", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 1 2\r\n\r\n", status: 400},
		{name: "content-length empty", in: "POST / HTTP/1.1\r\n" + host + "Content-Length:\r\n\r\n", status: 400},
		{name: "content-length overflow", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 99999999999999999999999\r\n\r\n", status: 400},
		{name: "chunked", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n", status: 200,
			want: `POST / 1.1 chunked | Host="h" | Transfer-Encoding="chunked"`},
		{name: "chunked upper case", in: "POST / HTTP/1.1\r\n" + host + "transfer-encoding: CHUNKED\r\n\r\n", status: 200,
			want: `POST / 1.1 chunked | Host="h" | transfer-encoding="CHUNKED"`},
		{name: "TE and CL", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
		{name: "CL after TE", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", status: 400},
		{name: "TE in HTTP/1.0", in: "POST / HTTP/1.0\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n", status: 400},
		{name: "TE gzip", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n", status: 501},
		{name: "TE chunked not last", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, gzip\r\n\r\n", status: 501},
		{name: "TE gzip, chunked", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n", status: 501},
		{name: "TE chunked twice", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, chunked\r\n\r\n", status: 501},
		{name: "TE two fields", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", status: 501},
		{name: "TE identity", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: identity\r\n\r\n", status: 501},
		{name: "TE leading comma", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: , chunked\r\n\r\n", status: 400},
		{name: "TE trailing comma", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked ,\r\n\r\n", status: 400},
		{name: "TE gzip,,chunked", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip,,chunked\r\n\r\n", status: 400},
		{name: "TE and CL in HTTP/1.0", in: "POST / HTTP/1.0\r\n" + host + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
		{name: "TE empty", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding:\r\n\r\n", status: 400},
		{name: "TE vertical tab", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: \vchunked\r\n\r\n", status: 400},

		// Line ends, folding and whitespace (RFC 9112 sections 2.2, 5).
		{name: "bare LF", in: "GET / HTTP/1.1\n" + host + "\r\n", status: 400},
		{name: "bare LF in a field", in: "GET / HTTP/1.1\r\nHost: h\n\r\n", status: 400},
		{name: "bare LF ending the head", in: "GET / HTTP/1.1\r\n" + host + "\n", status: 400},
		{name: "bare CR in a value", in: "GET / HTTP/1.1\r\n" + host + "A: a\rb\r\n\r\n", status: 400},
		{name: "bare CR ending a line", in: "GET / HTTP/1.1\r\n" + host + "A: 1\rB: 2\r\n\r\n", status: 400},
		{name: "CR CR LF", in: "GET / HTTP/1.1\r\n" + host + "A: 1\r\r\n\r\n", status: 400},
		{name: "obs-fold", in: "GET / HTTP/1.1\r\n" + host + "A: one\r\n two\r\n\r\n", status: 400},
		{name: "obs-fold with a tab", in: "GET / HTTP/1.1\r\n" + host + "A: one\r\n\ttwo\r\n\r\n", status: 400},
		{name: "obs-fold of Content-Length", in: "POST / HTTP/1.1\r\n" + host + "Content-Length:\r\n 5\r\n\r\nhello", status: 400},
		{name: "whitespace before the first field", in: "GET / HTTP/1.1\r\n A: 1\r\n" + host + "\r\n", status: 400},
		{name: "space before colon", in: "GET / HTTP/1.1\r\n" + host + "A : 1\r\n\r\n", status: 400},
		{name: "space before colon of Content-Length", in: "POST / HTTP/1.1\r\n" + host + "Content-Length : 5\r\n\r\nhello", status: 400},
		{name: "tab before colon of Transfer-Encoding", in: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding\t: chunked\r\n\r\n", status: 400},
		{name: "space in a name", in: "GET / HTTP/1.1\r\n" + host + "A B: 1\r\n\r\n", status: 400},
		{name: "empty name", in: "GET / HTTP/1.1\r\n" + host + ": 1\r\n\r\n", status: 400},
		{name: "no colon", in: "GET / HTTP/1.1\r\n" + host + "A\r\n\r\n", status: 400},
		{name: "colon in the value", in: "GET / HTTP/1.1\r\n" + host + "A: b:c\r\n\r\n", status: 200,
			want: `GET / 1.1 | Host="h" | A="b:c"`},

		// Control bytes.
		{name: "NUL in a value", in: "GET / HTTP/1.1\r\n" + host + "A: a\x00b\r\n\r\n", status: 400},
		{name: "NUL in a name", in: "GET / HTTP/1.1\r\n" + host + "A\x00B: 1\r\n\r\n", status: 400},
		{name: "control byte in a value", in: "GET / HTTP/1.1\r\n" + host + "A: a\x01b\r\n\r\n", status: 400},
		{name: "DEL in a value", in: "GET / HTTP/1.1\r\n" + host + "A: a\x7fb\r\n\r\n", status: 400},
		{name: "escape in a value", in: "GET / HTTP/1.1\r\n" + host + "A: \x1b[31m\r\n\r\n", status: 400},
		{name: "tab inside a value", in: "GET / HTTP/1.1\r\n" + host + "A: a\tb\r\n\r\n", status: 200,
			want: `GET / 1.1 | Host="h" | A="a\tb"`},
		{name: "control byte in a name", in: "GET / HTTP/1.1\r\n" + host + "A\x01B: 1\r\n\r\n", status: 400},
		{name: "non-ASCII in a name", in: "GET / HTTP/1.1\r\n" + host + "\xc3\xa9: 1\r\n\r\n", status: 400},
		{name: "NUL in the target", in: "GET /a\x00b HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "control byte in the target", in: "GET /a\x01b HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "DEL in the target", in: "GET /a\x7f HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "non-ASCII in the target", in: "GET /caf\xc3\xa9 HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "NUL in the method", in: "G\x00T / HTTP/1.1\r\n" + host + "\r\n", status: 400},

		// Methods (RFC 9110 section 9.1: any token, case-sensitive).
		{name: "unknown method", in: "FROB / HTTP/1.1\r\n" + host + "\r\n", status: 200, want: `FROB / 1.1 | Host="h"`},
		{name: "lower-case method", in: "get / HTTP/1.1\r\n" + host + "\r\n", status: 200, want: `get / 1.1 | Host="h"`},
		{name: "method of tchars", in: "M-_.!#$%&'*+^`|~9 / HTTP/1.1\r\n" + host + "\r\n", status: 200,
			want: "M-_.!#$%&'*+^`|~9 / 1.1 | Host=\"h\""},
		{name: "long method", in: strings.Repeat("A", 40) + " / HTTP/1.1\r\n" + host + "\r\n", status: 200,
			want: strings.Repeat("A", 40) + ` / 1.1 | Host="h"`},
		{name: "method with @", in: "G@T / HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "method with a slash", in: "G/T / HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "empty method", in: " / HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "PRI", in: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", status: 505},

		// Request line.
		{name: "two spaces after the method", in: "GET  / HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "two spaces before the version", in: "GET /  HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "space in the target", in: "GET /a b HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "tab separator", in: "GET\t/ HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "trailing space", in: "GET / HTTP/1.1 \r\n" + host + "\r\n", status: 400},
		{name: "no version (HTTP/0.9)", in: "GET /\r\n\r\n", status: 400},
		{name: "empty request line", in: "\r\n\r\n", status: 400},
		{name: "version lower case", in: "GET / http/1.1\r\n" + host + "\r\n", status: 400},
		{name: "version 1.10", in: "GET / HTTP/1.10\r\n" + host + "\r\n", status: 400},
		{name: "version 1.2 read as 1.1", in: "GET / HTTP/1.2\r\n" + host + "\r\n", status: 200, want: `GET / 1.1 | Host="h"`},
		{name: "version 1.9 read as 1.1", in: "GET / HTTP/1.9\r\n" + host + "\r\n", status: 200, want: `GET / 1.1 | Host="h"`},
		{name: "version 2.0", in: "GET / HTTP/2.0\r\n" + host + "\r\n", status: 505},
		{name: "version 0.9", in: "GET / HTTP/0.9\r\n" + host + "\r\n", status: 505},
		{name: "version 3.0", in: "GET / HTTP/3.0\r\n" + host + "\r\n", status: 505},
		{name: "version x.1", in: "GET / HTTP/x.1\r\n" + host + "\r\n", status: 400},

		// Targets (RFC 9112 section 3.2).
		{name: "absolute-form", in: "GET http://h/a?q=1 HTTP/1.1\r\nHost: other\r\n\r\n", status: 200,
			want: `GET http://h/a?q=1 1.1 | Host="other"`},
		{name: "absolute-form https", in: "GET https://h/a HTTP/1.1\r\n" + host + "\r\n", status: 200,
			want: `GET https://h/a 1.1 | Host="h"`},
		{name: "absolute-form without Host", in: "GET http://h/a HTTP/1.1\r\n\r\n", status: 400},
		{name: "asterisk-form", in: "OPTIONS * HTTP/1.1\r\n" + host + "\r\n", status: 200, want: `OPTIONS * 1.1 | Host="h"`},
		{name: "asterisk-form with GET", in: "GET * HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "authority-form", in: "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", status: 200,
			want: `CONNECT h:443 1.1 | Host="h:443"`},
		{name: "CONNECT with a path", in: "CONNECT /a HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "relative target", in: "GET a HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "fragment", in: "GET /a#f HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "absolute-form with a fragment", in: "GET http://h/#f HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "scheme only", in: "GET a: HTTP/1.1\r\n" + host + "\r\n", status: 200, want: `GET a: 1.1 | Host="h"`},
		{name: "scheme starting with a digit", in: "GET 1a://h/ HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "no scheme before the colon", in: "GET ://h/ HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "authority-form IPv6", in: "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n", status: 200, want: `CONNECT [::1]:443 1.1 | Host="[::1]:443"`},
		{name: "authority-form without a port", in: "CONNECT h HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "authority-form with a letter in the port", in: "CONNECT h:44a HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "authority-form with userinfo", in: "CONNECT u@h:443 HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "authority-form with a path", in: "CONNECT h:443/a HTTP/1.1\r\n" + host + "\r\n", status: 400},
		{name: "CONNECT asterisk", in: "CONNECT * HTTP/1.1\r\n" + host + "\r\n", status: 400},

		// Host (RFC 9112 section 3.2).
		{name: "no Host", in: "GET / HTTP/1.1\r\n\r\n", status: 400},
		{name: "two Hosts", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400},
		{name: "two equal Hosts", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", status: 400},
		{name: "empty Host", in: "GET / HTTP/1.1\r\nHost:\r\n\r\n", status: 200, want: `GET / 1.1 | Host=""`},
		{name: "Host with a space", in: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", status: 400},
		{name: "Host with a slash", in: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", status: 400},
		{name: "Host with a port", in: "GET / HTTP/1.1\r\nHost: a:80\r\n\r\n", status: 200, want: `GET / 1.1 | Host="a:80"`},
		{name: "Host IPv6", in: "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", status: 200, want: `GET / 1.1 | Host="[::1]:80"`},
		{name: "HTTP/1.0 without Host", in: "GET / HTTP/1.0\r\n\r\n", status: 200, want: `GET / 1.0 close`},
		{name: "HTTP/1.0 with two Hosts", in: "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", status: 400},

		// Connection (RFC 9112 section 9.6).
		{name: "HTTP/1.0 closes", in: "GET / HTTP/1.0\r\n" + host + "\r\n", status: 200, want: `GET / 1.0 close | Host="h"`},
		{name: "HTTP/1.0 keep-alive", in: "GET / HTTP/1.0\r\n" + host + "Connection: Keep-Alive\r\n\r\n", status: 200,
			want: `GET / 1.0 | Host="h" | Connection="Keep-Alive"`},
		{name: "close", in: "GET / HTTP/1.1\r\n" + host + "Connection: foo, CLOSE\r\n\r\n", status: 200,
			want: `GET / 1.1 close | Host="h" | Connection="foo, CLOSE"`},
		{name: "HTTP/1.0 close, keep-alive", in: "GET / HTTP/1.0\r\n" + host + "Connection: close, keep-alive\r\n\r\n", status: 200,
			want: `GET / 1.0 close | Host="h" | Connection="close, keep-alive"`},
		{name: "HTTP/1.0 close then keep-alive", in: "GET / HTTP/1.0\r\n" + host + "Connection: close\r\nConnection: keep-alive\r\n\r\n", status: 200,
			want: `GET / 1.0 close | Host="h" | Connection="close" | Connection="keep-alive"`},
		{name: "keep-alive does not undo close", in: "GET / HTTP/1.1\r\n" + host + "Connection: close\r\nConnection: keep-alive\r\n\r\n", status: 200,
			want: `GET / 1.1 close | Host="h" | Connection="close" | Connection="keep-alive"`},
		{name: "upgrade", in: "GET / HTTP/1.1\r\n" + host + "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n", status: 200,
			want: `GET / 1.1 upgrade | Host="h" | Connection="Upgrade" | Upgrade="websocket"`},

		// Expect (RFC 9110 section 10.1.1).
		{name: "expect 100-continue", in: "POST / HTTP/1.1\r\n" + host + "Content-Length: 1\r\nExpect: 100-continue\r\n\r\n", status: 200,
			want: `POST / 1.1 length=1 expect100 | Host="h" | Content-Length="1" | Expect="100-continue"`, rest: ""},
		{name: "expect 100-Continue", in: "POST / HTTP/1.1\r\n" + host + "Expect: 100-Continue\r\n\r\n", status: 200,
			want: `POST / 1.1 expect100 | Host="h" | Expect="100-Continue"`},
		{name: "expect other", in: "POST / HTTP/1.1\r\n" + host + "Expect: foo\r\n\r\n", status: 200,
			want: `POST / 1.1 expect-other | Host="h" | Expect="foo"`},
		{name: "expect 100-continue in HTTP/1.0 is ignored", in: "POST / HTTP/1.0\r\n" + host + "Expect: 100-continue\r\n\r\n", status: 200,
			want: `POST / 1.0 close | Host="h" | Expect="100-continue"`},

		// Ends of input.
		{name: "nothing", in: "", status: 0},
		{name: "cut in the request line", in: "GET / HT", status: 0},
		{name: "cut in the fields", in: "GET / HTTP/1.1\r\n" + host, status: 0},
	}, Limits{}, (*Head).ReadRequest)
}

// TestReadRequestLimits: the head's bytes (request line and fields, line ends
// included) and its number of fields are bounded, with 431.
func TestReadRequestLimits(t *testing.T) {
	limits := Limits{MaxHeadBytes: 100, MaxFields: 3}
	line := "GET / HTTP/1.1\r\n" // 16 bytes
	runHeadCases(t, []headCase{
		{name: "100 bytes", in: line + host + "A: " + strings.Repeat("a", 100-16-9-5-2) + "\r\n\r\n", status: 200,
			want: `GET / 1.1 | Host="h" | A="` + strings.Repeat("a", 100-16-9-5-2) + `"`},
		{name: "101 bytes", in: line + host + "A: " + strings.Repeat("a", 100-16-9-5-1) + "\r\n\r\n", status: 431},
		{name: "long request line", in: "GET /" + strings.Repeat("a", 100) + " HTTP/1.1\r\n" + host + "\r\n", status: 431},
		{name: "3 fields", in: line + host + "A: 1\r\nB: 2\r\n\r\n", status: 200, want: `GET / 1.1 | Host="h" | A="1" | B="2"`},
		{name: "4 fields", in: line + host + "A: 1\r\nB: 2\r\nC: 3\r\n\r\n", status: 431},
	}, limits, (*Head).ReadRequest)

	// The default: 64 KiB and no bound on fields.
	runHeadCases(t, []headCase{
		{name: "64 KiB", in: line + host + "A: " + strings.Repeat("a", 64<<10-16-9-5-2) + "\r\n\r\n", status: 200,
			want: `GET / 1.1 | Host="h" | A="` + strings.Repeat("a", 64<<10-16-9-5-2) + `"`},
		{name: "64 KiB and a byte", in: line + host + "A: " + strings.Repeat("a", 64<<10-16-9-5-1) + "\r\n\r\n", status: 431},
		{name: "70 KiB line", in: line + host + "A: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", status: 431},
		{name: "1000 fields", in: line + host + strings.Repeat("A: 1\r\n", 1000) + "\r\n", status: 200,
			want: `GET / 1.1 | Host="h"` + strings.Repeat(` | A="1"`, 1000)},
	}, Limits{}, (*Head).ReadRequest)
}

func TestReadResponse(t *testing.T) {
	runHeadCases(t, []headCase{
		{name: "200", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", status: 200,
			want: `1.1 200 "OK" length=5 | Content-Length="5"`, rest: "hello"},
		{name: "no reason", in: "HTTP/1.1 204\r\n\r\n", status: 200, want: `1.1 204 ""`},
		{name: "empty reason", in: "HTTP/1.1 204 \r\n\r\n", status: 200, want: `1.1 204 ""`},
		{name: "reason with spaces", in: "HTTP/1.1 404 Not  Found \r\n\r\n", status: 200, want: `1.1 404 "Not  Found "`},
		{name: "reason with obs-text", in: "HTTP/1.1 200 \xe9\r\n\r\n", status: 200, want: `1.1 200 "\xe9"`},
		{name: "HTTP/1.0", in: "HTTP/1.0 200 OK\r\n\r\n", status: 200, want: `1.0 200 "OK" close`},
		{name: "HTTP/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", status: 200,
			want: `1.0 200 "OK" | Connection="keep-alive"`},
		{name: "100", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", status: 200, want: `1.1 100 "Continue"`, rest: "HTTP/1.1 200 OK\r\n"},
		{name: "101", in: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", status: 200,
			want: `1.1 101 "Switching Protocols" upgrade | Upgrade="websocket" | Connection="Upgrade"`},
		{name: "999", in: "HTTP/1.1 999 X\r\n\r\n", status: 200, want: `1.1 999 "X"`},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", status: 200,
			want: `1.1 200 "OK" chunked | Transfer-Encoding="chunked"`},
		{name: "close", in: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", status: 200, want: `1.1 200 "OK" close | Connection="close"`},
		{name: "no Host needed", in: "HTTP/1.1 200 OK\r\nA: 1\r\n\r\n", status: 200, want: `1.1 200 "OK" | A="1"`},

		// Refused: a status line other than "HTTP/1.x DDD reason" is a 502.
		{name: "status 099", in: "HTTP/1.1 099 X\r\n\r\n", status: 502},
		{name: "status of 4 digits", in: "HTTP/1.1 2000 OK\r\n\r\n", status: 502},
		{name: "status of 2 digits", in: "HTTP/1.1 20 OK\r\n\r\n", status: 502},
		{name: "status not digits", in: "HTTP/1.1 2x0 OK\r\n\r\n", status: 502},
		{name: "two spaces before the status", in: "HTTP/1.1  200 OK\r\n\r\n", status: 502},
		{name: "tab after the status", in: "HTTP/1.1 200\tOK\r\n\r\n", status: 502},
		{name: "control byte in the reason", in: "HTTP/1.1 200 O\x01K\r\n\r\n", status: 502},
		{name: "version 1.2 read as 1.1", in: "HTTP/1.2 200 OK\r\n\r\n", status: 200, want: `1.1 200 "OK"`},
		{name: "version 2.0", in: "HTTP/2.0 200 OK\r\n\r\n", status: 502},
		{name: "lower-case version", in: "http/1.1 200 OK\r\n\r\n", status: 502},
		{name: "HTTP/0.9 (a body, no head)", in: "hello\r\n", status: 502},
		{name: "bare LF status line", in: "HTTP/1.1 200 OK\n\r\n", status: 400},

		// Fields are read as in requests.
		{name: "TE and CL", in: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
		{name: "CL differ", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", status: 400},
		{name: "CL invalid", in: "HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\n", status: 400},
		{name: "TE gzip", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", status: 501},
		{name: "TE in HTTP/1.0", in: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
		{name: "obs-fold", in: "HTTP/1.1 200 OK\r\nA: one\r\n two\r\n\r\n", status: 400},
		{name: "bare LF", in: "HTTP/1.1 200 OK\r\nA: 1\n\r\n", status: 400},
		{name: "NUL", in: "HTTP/1.1 200 OK\r\nA: a\x00b\r\n\r\n", status: 400},
		{name: "space before colon", in: "HTTP/1.1 200 OK\r\nA : 1\r\n\r\n", status: 400},
		{name: "cut", in: "HTTP/1.1 200 OK\r\nA: 1\r\n", status: 0},
	}, Limits{}, (*Head).ReadResponse)

	runHeadCases(t, []headCase{
		{name: "head over the limit", in: "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("a", 100) + "\r\n\r\n", status: 431},
	}, Limits{MaxHeadBytes: 100}, (*Head).ReadResponse)
}

// TestHeadReuse: a head read after another forgets the first one's fields and
// flags (a connection's Head is reused from message to message).
func TestHeadReuse(t *testing.T) {
	br := bufio.NewReader(strings.NewReader("POST /a HTTP/1.0\r\nHost: a\r\nContent-Length: 0\r\nExpect: 100-continue\r\nConnection: close, Upgrade\r\nUpgrade: x\r\n\r\n" +
		"GET /b HTTP/1.1\r\nHost: b\r\n\r\n"))
	var h Head
	if err := h.ReadRequest(br, Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := h.ReadRequest(br, Limits{}); err != nil {
		t.Fatal(err)
	}
	if got, want := h.summary(), `GET /b 1.1 | Host="b"`; got != want {
		t.Errorf("second head %s, want %s", got, want)
	}
	if h.ConnectionNames([]byte("upgrade")) {
		t.Errorf("the first head's Connection names are still listed")
	}
}

func TestConnectionNames(t *testing.T) {
	var h Head
	in := "GET / HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, X-Hop ,, \r\nconnection: te\r\n\r\n"
	if err := h.ReadRequest(bufio.NewReader(strings.NewReader(in)), Limits{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"x-hop": true, "X-HOP": true, "TE": true, "keep-alive": true, "X": false, "host": false, "": false} {
		if got := h.ConnectionNames([]byte(name)); got != want {
			t.Errorf("ConnectionNames(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestReadRequestAllocs: once a connection's Head has grown to its messages'
// size, reading a head allocates nothing.
func TestReadRequestAllocs(t *testing.T) {
	msg := "GET /a HTTP/1.1\r\nHost: h\r\nUser-Agent: x\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n"
	r := strings.NewReader(msg)
	br := bufio.NewReader(r)
	var h Head
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(msg)
		br.Reset(r)
		if err := h.ReadRequest(br, Limits{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per head, want 0", allocs)
	}
}
