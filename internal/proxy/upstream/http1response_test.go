package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/http1"
	"github.com/portico-dev/portico/internal/proxy/internal/h1corpus"
)

// FuzzNewResponseLikeNetHTTP holds newResponse and setTrailer to what
// http.ReadResponse builds, for every response both it and the codec accept
// (where they differ is FuzzResponseDifferential's, in package http1): the
// *http.Response the connection manager and ReverseProxy read is the same.
// Its seeds (the response corpus and the cases below) run with go test.
func FuzzNewResponseLikeNetHTTP(f *testing.F) {
	cases, err := h1corpus.Load("../internal/h1corpus/testdata/responses.txt")
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		f.Add(c.Reply, bytes.HasPrefix(c.Send, []byte("HEAD ")))
	}
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\ncontent-length: 5\r\nX-A: 1\r\nx-a: 2\r\nSet-Cookie: a=1\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T, x-u\r\nTrailer: X-V\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\nx-u: 2\r\nx-u: 3\r\nX-W: 4\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTrailer: X-T\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: \"x\"\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\nContent-Length: 3\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\n\r\nuntil the end",
		"HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nX-E2E: 2\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 404 Not Found\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nCache-Control: max-age=5\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 999 Whatever  it is \r\nX-Empty:\r\nX-Tab: a\tb\r\nX-Obs: caf\xe9\r\n\r\n",
		"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, headRequest bool) {
		req := &http.Request{Method: http.MethodGet}
		if headRequest {
			req.Method = http.MethodHead
		}
		want, wantBody, err := readWithNetHTTP(in, req)
		if err != nil {
			return
		}
		br := bufio.NewReader(bytes.NewReader(in))
		var h http1.Head
		if err := h.ReadResponse(br, responseLimits); err != nil {
			return
		}
		got := newResponse(&h, req)
		var b http1.BodyReader
		b.ResetResponse(br, &h, headRequest)
		announced := got.Trailer.Clone()
		gotBody, err := io.ReadAll(&b)
		if err != nil {
			return
		}
		setTrailer(got, &b.Trailer)
		if want.ProtoMinor > 1 {
			return // read as HTTP/1.1 by the codec (RFC 9110 §6.2)
		}
		// The one difference left: net/http keeps the space after a status
		// without reason ("200 "); the codec's head has no reason either way.
		if len(want.Status) == len("200 ") {
			want.Status = want.Status[:3]
		}
		if h.Minor == 1 && h.Close {
			dropNominated(want.Header, &h)
		}
		for _, d := range []struct {
			what      string
			got, want any
		}{
			{"Status", got.Status, want.Status},
			{"StatusCode", got.StatusCode, want.StatusCode},
			{"Proto", got.Proto, want.Proto},
			{"ProtoMinor", got.ProtoMinor, want.ProtoMinor},
			{"Header", got.Header, want.Header},
			{"ContentLength", got.ContentLength, want.ContentLength},
			{"TransferEncoding", got.TransferEncoding, want.TransferEncoding},
			{"Close", got.Close, want.Close},
			{"announced Trailer", announced, want.announced},
			{"Trailer", got.Trailer, want.Trailer},
			{"body", string(gotBody), string(wantBody)},
		} {
			if !reflect.DeepEqual(d.got, d.want) {
				t.Errorf("%s of %q: %#v, net/http: %#v", d.what, in, d.got, d.want)
			}
		}
	})
}

// dropNominated removes from header the fields the Connection fields of h
// name, which net/http keeps when it removes a Connection: close and the
// codec's client does not (dropConnection).
func dropNominated(header http.Header, h *http1.Head) {
	for i := range h.NumFields() {
		if name, value := h.Field(i); strings.EqualFold(string(name), "Connection") {
			for tok := range strings.SplitSeq(string(value), ",") {
				header.Del(textproto.TrimString(tok))
			}
		}
	}
}

type netHTTPResponse struct {
	*http.Response
	announced http.Header // Trailer before the body was read
}

func readWithNetHTTP(in []byte, req *http.Request) (*netHTTPResponse, []byte, error) {
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(in)), req)
	if err != nil {
		return nil, nil, err
	}
	announced := res.Trailer.Clone()
	body, err := io.ReadAll(res.Body)
	return &netHTTPResponse{res, announced}, body, err
}

// BenchmarkReadResponse compares reading a typical response (head and a
// small body) into an *http.Response with net/http's parser and with the
// codec, as the client does, the codec's head and body reader reused as on a
// pooled connection.
func BenchmarkReadResponse(b *testing.B) {
	msg := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Sat, 28 Nov 2026 06:00:00 GMT\r\nContent-Length: 12\r\n\r\nhello, world")
	req := &http.Request{Method: http.MethodGet}
	r := bytes.NewReader(msg)
	br := bufio.NewReader(r)
	b.Run("net/http", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Reset(msg)
			br.Reset(r)
			res, err := http.ReadResponse(br, req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, res.Body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		var h http1.Head
		var body http1.BodyReader
		for b.Loop() {
			r.Reset(msg)
			br.Reset(r)
			if err := h.ReadResponse(br, responseLimits); err != nil {
				b.Fatal(err)
			}
			res := newResponse(&h, req)
			body.ResetResponse(br, &h, false)
			if _, err := io.Copy(io.Discard, &body); err != nil {
				b.Fatal(err)
			}
			setTrailer(res, &body.Trailer)
		}
	})
}

// Responses built one after the other in one room (a kept stream's) are the
// responses built without it, and the header values a caller took from one
// survive the room's Forget: the client's response head points into them
// until it is written, after the handler returns.
func TestResponseRoomBuildsTheSameResponses(t *testing.T) {
	heads := []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\ncontent-length: 5\r\nX-A: 1\r\nx-a: 2\r\nSet-Cookie: a=1\r\n\r\n",
		"HTTP/1.1 404 Not Found\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T, x-u\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nX-E2E: 2\r\nContent-Length: 2\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nH: 8\r\nI: 9\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
	}
	var room ResponseRoom
	req := &http.Request{Method: http.MethodGet}
	for _, head := range heads {
		var h http1.Head
		if err := h.ReadResponse(bufio.NewReader(strings.NewReader(head)), responseLimits); err != nil {
			t.Fatalf("%q: %v", head, err)
		}
		want := newResponse(&h, req)
		got := newResponseIn(&room, &h, req)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: built in the room\n%+v\nwithout it\n%+v", head, got, want)
		}
		taken := got.Header.Clone()
		held := map[string][]string{}
		for k, vv := range got.Header {
			held[k] = vv // as the connection manager's copy holds them
		}
		room.Forget()
		if len(room.header) != 0 || room.res.Header != nil {
			t.Errorf("%q: the room still holds the response after Forget", head)
		}
		if !reflect.DeepEqual(http.Header(held), taken) {
			t.Errorf("%q: the values taken changed with Forget: %v, want %v", head, held, taken)
		}
	}
}

// Every response of the corpus, after a GET and after a HEAD, is built in one
// shared room as it is without one, whatever the room held before.
func TestResponseRoomBuildsTheCorpusAlike(t *testing.T) {
	cases, err := h1corpus.Load("../internal/h1corpus/testdata/responses.txt")
	if err != nil {
		t.Fatal(err)
	}
	var room ResponseRoom
	built := 0
	for pass := range 2 {
		for i, c := range cases {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				var h http1.Head
				if h.ReadResponse(bufio.NewReader(bytes.NewReader(c.Reply)), responseLimits) != nil {
					continue // refused: no response is built
				}
				req := &http.Request{Method: method}
				want, got := newResponse(&h, req), newResponseIn(&room, &h, req)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("pass %d, case %d, %s: built in the room\n%+v\nwithout it\n%+v", pass, i, method, got, want)
				}
				built++
				if (i+pass)%3 == 0 {
					room.Forget()
				}
			}
		}
	}
	if built == 0 {
		t.Fatal("no corpus response was built")
	}
}

// A room keeps no value of an earlier response, even where this one's
// repeated names left slots unused; one grown by a response of many fields
// is dropped when forgotten; and a body reader forgotten with its room
// stays closed.
func TestResponseRoomKeepsNothingOld(t *testing.T) {
	var room ResponseRoom
	read := func(head string) *http.Response {
		t.Helper()
		var h http1.Head
		if err := h.ReadResponse(bufio.NewReader(strings.NewReader(head)), responseLimits); err != nil {
			t.Fatal(err)
		}
		return newResponseIn(&room, &h, &http.Request{Method: http.MethodGet})
	}
	read("HTTP/1.1 200 OK\r\nA: old-a\r\nB: old-b\r\nC: old-c\r\n\r\n")
	room.Forget()
	read("HTTP/1.1 200 OK\r\nSet-Cookie: 1\r\nSet-Cookie: 2\r\nSet-Cookie: 3\r\n\r\n")
	for i, v := range room.values[:cap(room.values)] {
		if strings.HasPrefix(v, "old") {
			t.Errorf("the room's value %d is still the earlier response's %q", i, v)
		}
	}

	var many strings.Builder
	many.WriteString("HTTP/1.1 200 OK\r\n")
	for i := range 2 * MaxRoomFields {
		fmt.Fprintf(&many, "X-F%d: %d\r\n", i, i)
	}
	many.WriteString("\r\n")
	read(many.String())
	room.Forget()
	if room.header != nil || room.values != nil {
		t.Errorf("a room grown to %d fields was kept", 2*MaxRoomFields)
	}

	room.body.pc = nil
	if err := room.body.Close(); err != nil {
		t.Errorf("closing a forgotten body: %v", err)
	}
	if _, err := room.body.Read(make([]byte, 1)); err == nil {
		t.Error("a forgotten body could be read")
	}
}

// TestResponseRoomAllocatesOnlyTheHeadText: a response built in a room
// allocates the text its names and values are made of, and nothing else (the
// *http.Response was once allocated anyway, then dropped for the room's).
func TestResponseRoomAllocatesOnlyTheHeadText(t *testing.T) {
	var h http1.Head
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nServer: upstream\r\n\r\n"
	if err := h.ReadResponse(bufio.NewReader(strings.NewReader(head)), responseLimits); err != nil {
		t.Fatal(err)
	}
	req := &http.Request{Method: http.MethodGet}
	var room ResponseRoom
	newResponseIn(&room, &h, req) // the room's map and values, made once
	room.Forget()
	allocs := testing.AllocsPerRun(100, func() {
		if res := newResponseIn(&room, &h, req); res != &room.res {
			t.Fatal("the response was not built in the room")
		}
		room.Forget()
	})
	if allocs != 1 {
		t.Errorf("a response built in a room made %v allocations, want 1 (its head's text)", allocs)
	}
}
