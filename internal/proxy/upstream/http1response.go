package upstream

import (
	"maps"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/portico-dev/portico/internal/proxy/http1"
)

// responseLimits bound what the client reads of a response head, of a chunk
// line and of a trailer section: the codec's default (64 KiB), which is also
// what a pooled connection's reused head keeps at most. A response over it
// is the proxy's 502. The connection's readLimit bounds a head and the 1xx
// heads before it together.
var responseLimits = http1.Limits{}

// malformedResponseError is a response the codec refused. Its text says
// "malformed", which the connection manager reports as a protocol error
// (502, UPE), as it did for net/http's parser's errors.
type malformedResponseError struct{ err *http1.Error }

// errInterimFraming: a 1xx response with Content-Length or Transfer-Encoding.
var errInterimFraming = &http1.Error{Status: http.StatusBadGateway, Reason: "interim response with framing fields"}

func (e *malformedResponseError) Error() string {
	if e.err.Status == http.StatusRequestHeaderFieldsTooLarge {
		return "malformed HTTP response from the upstream: its head, a chunk line or its trailer is over 64 KiB"
	}
	return "malformed HTTP response from the upstream: " + e.err.Reason
}

func (e *malformedResponseError) Unwrap() error { return e.err }

// newResponse builds the *http.Response that http.ReadResponse returns for
// the head h (read after a request req), without its body. For a message
// both parsers accept, every field is the same but for the fields a
// Connection: close names (FuzzResponseDifferential in
// package http1 and TestNewResponseLikeNetHTTP hold them to it): names
// canonicalised, Transfer-Encoding moved to TransferEncoding, a chunked
// response's Trailer field to the Trailer map's keys, repeated equal
// Content-Length fields made one, Cache-Control: no-cache added after
// Pragma: no-cache, an HTTP/1.1 Connection: close removed (with the fields it
// names, which net/http keeps: see dropConnection), ContentLength as
// net/http sets it (none after HEAD but the field's, 0 for 1xx, 204 and 304,
// -1 for chunked and close-delimited bodies), Close when the connection ends
// after the response.
func newResponse(h *http1.Head, req *http.Request) *http.Response {
	return newResponseIn(nil, h, req)
}

// ResponseRoom is where the codec's client builds the responses of a request
// whose target offers one (ResponseRoomer): the *http.Response, its header
// map and values, and its body reader, kept by the target's owner from request
// to request instead of allocated for each. The header values a caller took
// from a response stay valid until the room's next response.
type ResponseRoom struct {
	res    http.Response
	header http.Header
	values []string
	body   http1Body
}

// Forget drops what the room holds of its last exchange (the request, the
// upstream connection, the header map's entries) but for the header values,
// which a caller may still hold. A room grown by a response of many fields
// is dropped rather than kept: an upstream could otherwise have every client
// connection keep the room of its largest head, and clear it at each request.
func (r *ResponseRoom) Forget() {
	r.res, r.body = http.Response{}, http1Body{}
	r.body.closed.Store(true) // a late Close or Read finds it closed
	if len(r.header) > MaxRoomFields || cap(r.values) > MaxRoomFields {
		r.header, r.values = nil, nil
		return
	}
	clear(r.header)
}

// MaxRoomFields is the most header fields a room kept from request to
// request holds room for (the connection manager's for upstream request
// headers too).
const MaxRoomFields = 32

// ResponseRoomer is a request's target (under TargetKey) that offers the room
// its responses are built in. Its owner keeps the room from being used by
// another exchange until the request is over, and reuses it only when nothing
// of the exchange can reach it any more (not even its response's body reader).
type ResponseRoomer interface{ ResponseRoom() *ResponseRoom }

// roomOf returns the room the target offers; nil: none.
func roomOf(target any) *ResponseRoom {
	if r, ok := target.(ResponseRoomer); ok {
		return r.ResponseRoom()
	}
	return nil
}

// newResponseIn is newResponse building in room (nil: new allocations).
func newResponseIn(room *ResponseRoom, h *http1.Head, req *http.Request) *http.Response {
	// Not new(http.Response) first: it escapes, so it would be allocated even
	// when the room is used.
	var res *http.Response
	if room != nil {
		res = &room.res
	} else {
		res = new(http.Response)
	}
	*res = http.Response{
		StatusCode: h.Status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: h.Minor,
		Request:    req,
		Close:      h.Close,
	}
	if h.Minor == 0 {
		res.Proto = "HTTP/1.0"
	}
	res.Status, res.Header = statusAndHeader(h, room)
	header := res.Header
	if h.Chunked {
		delete(header, "Transfer-Encoding")
		res.TransferEncoding = []string{"chunked"}
		res.Trailer = announcedTrailer(header)
	}
	if cl := header["Content-Length"]; len(cl) > 1 {
		header["Content-Length"] = cl[:1] // equal, or the codec refuses them
	}
	if p := header["Pragma"]; len(p) > 0 && p[0] == "no-cache" && header["Cache-Control"] == nil {
		header["Cache-Control"] = []string{"no-cache"}
	}
	if h.Minor == 1 && h.Close {
		dropConnection(header)
	}
	noBody := h.Status < 200 || h.Status == http.StatusNoContent || h.Status == http.StatusNotModified
	switch {
	case req.Method == http.MethodHead:
		res.ContentLength = h.ContentLength
	case noBody:
		res.ContentLength = 0
	case h.Chunked:
		res.ContentLength = -1
	default:
		res.ContentLength = h.ContentLength
		// Without framing, the body ends with the connection.
		res.Close = res.Close || h.ContentLength < 0
	}
	return res
}

// dropConnection removes a Connection field that says close, as net/http
// does, and with it the fields it names: they are hop-by-hop (RFC 9110
// section 7.6.1), and the connection manager, which removes them from every
// other response, cannot tell which they were once the field is gone. The
// response's Close keeps the close. (net/http keeps them: the one place where
// newResponse's header is not net/http's.)
func dropConnection(header http.Header) {
	for _, v := range header["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				delete(header, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	delete(header, "Connection")
}

// statusAndHeader copies the status and the fields of h out of its buffer,
// which the next response reuses, into one string, and indexes it as
// net/http would: canonical names, values in order.
func statusAndHeader(h *http1.Head, room *ResponseRoom) (string, http.Header) {
	n := h.NumFields()
	reason := h.Reason()
	size := 4 + len(reason)
	for i := range n {
		name, value := h.Field(i)
		size += len(name) + len(value)
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteByte(byte('0' + h.Status/100))
	b.WriteByte(byte('0' + h.Status/10%10))
	b.WriteByte(byte('0' + h.Status%10))
	if len(reason) > 0 {
		b.WriteByte(' ')
		b.Write(reason)
	}
	statusEnd := b.Len()
	for i := range n {
		name, value := h.Field(i)
		b.Write(name)
		b.Write(value)
	}
	text := b.String()
	header, values := roomFor(room, n) // one array for the usual one value per name
	off := statusEnd
	for i := range n {
		name, value := h.Field(i)
		key := textproto.CanonicalMIMEHeaderKey(text[off : off+len(name)])
		off += len(name)
		v := text[off : off+len(value)]
		off += len(value)
		if vv := header[key]; vv != nil {
			header[key] = append(vv, v)
			continue
		}
		values[0] = v
		header[key], values = values[:1:1], values[1:]
	}
	clear(values) // what repeated names left unused, in a room: no old value stays
	return text[:statusEnd], header
}

// roomFor returns an empty header map and an array of n values: room's
// (the values past n emptied, so that they keep no old response alive), or
// new ones.
func roomFor(room *ResponseRoom, n int) (http.Header, []string) {
	if room == nil {
		return make(http.Header, n), make([]string, n)
	}
	if room.header == nil {
		room.header = make(http.Header, n)
	}
	clear(room.header)
	if cap(room.values) < n {
		room.values = make([]string, n)
	}
	clear(room.values[n:cap(room.values)])
	return room.header, room.values[:n]
}

// announcedTrailer takes a chunked response's Trailer field out of its header
// into the names of a Trailer map, as net/http does (ReverseProxy announces
// them to the client before the body). The framing fields a trailer cannot
// carry are left out: net/http refuses such a response, and the codec
// refuses them in the trailer itself.
func announcedTrailer(header http.Header) http.Header {
	vv := header["Trailer"]
	if vv == nil {
		return nil
	}
	delete(header, "Trailer")
	trailer := http.Header{}
	for _, v := range vv {
		for name := range strings.SplitSeq(v, ",") {
			switch key := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name)); key {
			case "", "Content-Length", "Transfer-Encoding", "Trailer":
			default:
				trailer[key] = nil
			}
		}
	}
	if len(trailer) == 0 {
		return nil
	}
	return trailer
}

// setTrailer merges the trailer fields the body ended with into res.Trailer,
// as net/http does once the body is read.
func setTrailer(res *http.Response, t *http1.Head) {
	n := t.NumFields()
	if n == 0 {
		return
	}
	received := make(http.Header, n)
	for i := range n {
		name, value := t.Field(i)
		received.Add(string(name), string(value))
	}
	if res.Trailer == nil {
		res.Trailer = received
		return
	}
	maps.Copy(res.Trailer, received)
}
