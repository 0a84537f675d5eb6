package hcm

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// encodedBody is a response whose body goes through HTTP filters' body
// encoders (filter.BodyEncoder) on its way to the client.
type encodedBody struct {
	w filter.BodyWriter // the last encoder's writer
	// announced are the trailer names the upstream's head announced, whose
	// values ReverseProxy sets in the header map once the body is copied.
	announced []string
}

// encodeBody runs the body encoders of the request's route on a final
// response's head (not a 1xx, not an upgrade's 101, which are not encoded)
// and, when one of them wraps the body, sends the body through it.
func (w *responseWriter) encodeBody(status int) {
	h := w.Header()
	announced := h["Trailer"] // before an encoder changes them
	head := &w.head           // kept in the writer: no allocation per response
	*head = filter.ResponseHead{Status: status, Headers: filter.HeaderMap(h), Local: w.local, Filter: w.replyFilter, LocalBody: w.localBody}
	head.EndStream = noBody(w.enc.Request.Method, status) || headerValue(h, "Content-Length") == "0" ||
		(w.local && headerValue(h, "Content-Length") == "") // localReply declares the length of every body it sends
	sink := (*bodySink)(w)
	if out := w.hcm.Filters.EncodeResponse(w.enc, w.perFilter, head, sink); out != sink {
		w.body = &encodedBody{w: out, announced: announced}
	}
}

// noBody reports whether a response to method with status has no body
// whatever its headers say.
func noBody(method string, status int) bool {
	return method == http.MethodHead || status == http.StatusNoContent || status == http.StatusNotModified
}

// closeBody ends a body that went through encoders: the trailers that
// ReverseProxy put in the header map (announced ones under their names,
// others under http.TrailerPrefix) are handed to the encoders, which pass on
// the ones the client gets.
func (w *responseWriter) closeBody() {
	h := w.Header()
	var trailers filter.HeaderMap
	take := func(key, name string) {
		if vs, ok := h[key]; ok {
			if trailers == nil {
				trailers = filter.HeaderMap{}
			}
			trailers[name] = append(trailers[name], vs...)
			delete(h, key)
		}
	}
	for _, v := range w.body.announced {
		for name := range strings.SplitSeq(v, ",") {
			name = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
			take(name, name)
		}
	}
	for key := range h {
		if name, ok := strings.CutPrefix(key, http.TrailerPrefix); ok {
			take(key, textproto.CanonicalMIMEHeaderKey(name))
		}
	}
	if trailers == nil {
		_ = w.body.w.Close(nil)
		return
	}
	_ = w.body.w.Close(trailers)
}

// bodySink is the response writer seen from the encoders: the end of their
// chain, which sends to the client.
type bodySink responseWriter

func (b *bodySink) Write(p []byte) (int, error) { return (*responseWriter)(b).send(p) }

func (b *bodySink) Flush() error {
	return http.NewResponseController((*responseWriter)(b).ResponseWriter).Flush()
}

// Close sends the trailers the encoders left: net/http sends header map
// entries under http.TrailerPrefix as trailers (HTTP/1.1 chunked, HTTP/2).
func (b *bodySink) Close(trailers filter.Headers) error {
	if trailers == nil {
		return nil
	}
	h := (*responseWriter)(b).Header()
	trailers.Range(func(name, value string) bool {
		h.Add(http.TrailerPrefix+name, value)
		return true
	})
	return nil
}
