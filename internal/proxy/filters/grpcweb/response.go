package grpcweb

import (
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// responseMode is what a gRPC-Web request's response becomes, kept with the
// request (filter.Stream.SetState) from its decoding to its response.
type responseMode uint8

const (
	binaryResponse responseMode = iota + 1
	textResponse
)

// stateKey is the key of the request's responseMode.
type stateKey struct{}

func (m responseMode) contentType() string {
	if m == textResponse {
		return contentTypeGRPCWebTextProto
	}
	return contentTypeGRPCWebProto
}

// trailerFlag marks a gRPC-Web frame that holds the trailers.
const trailerFlag = 0x80

// EncodeResponse turns the upstream's gRPC response to a gRPC-Web request into a
// gRPC-Web response, as Envoy does: the content type is gRPC-Web's (+proto, in
// the mode the client's Accept asked for), the length goes, the trailers
// become the body's last frame, and in text mode every frame is base64 on its
// own. A response that is not gRPC (an error page, the proxy's own 503) gets
// a grpc-status for its HTTP status, and its body is dropped.
func (Filter) EncodeResponse(s *filter.Stream, _ any, head *filter.ResponseHead, next filter.BodyWriter) filter.BodyWriter {
	mode, ok := s.State(stateKey{}).(responseMode)
	if !ok {
		return nil
	}
	h := head.Headers
	bridged := isGRPCResponse(head) || isGRPCWebResponse(head)
	h.Del("Content-Length")
	h.Del("Trailer") // sent in the body instead
	h.Set("Content-Type", mode.contentType())
	if head.EndStream {
		return nil
	}
	if !bridged {
		h.Set("Grpc-Status", strconv.Itoa(filter.GRPCStatusOf(head.Status)))
		if head.Local && head.LocalBody != "" {
			h.Set("Grpc-Message", filter.GRPCMessage(head.LocalBody[:min(len(head.LocalBody), maxGRPCMessage)]))
		}
		return discard{next}
	}
	if mode == textResponse {
		return newTextWriter(next)
	}
	return binaryWriter{next}
}

// maxGRPCMessage bounds the body Envoy moves into grpc-message.
const maxGRPCMessage = 16 << 10

// isGRPCResponse is Envoy's test of a gRPC response: a trailers-only one
// (no body) with a grpc-status, or a 200 whose content type is gRPC's.
func isGRPCResponse(head *filter.ResponseHead) bool {
	if head.EndStream {
		return head.Headers.Get("Grpc-Status") != ""
	}
	return head.Status == http.StatusOK && filter.IsGRPCContentType(head.Headers.Get("Content-Type"))
}

// isGRPCWebResponse reports an upstream that answers gRPC-Web itself: a 200
// application/grpc-web or application/grpc-web+proto, parameters aside.
func isGRPCWebResponse(head *filter.ResponseHead) bool {
	ct, _, _ := strings.Cut(head.Headers.Get("Content-Type"), ";")
	ct = strings.TrimRight(ct, " \t")
	return head.Status == http.StatusOK &&
		(strings.EqualFold(ct, contentTypeGRPCWebProto) || strings.EqualFold(ct, contentTypeGRPCWeb))
}

// trailersFrame is the gRPC-Web frame of the trailers: lower-case
// "name:value\r\n" lines (in name order), after the flag and length.
func trailersFrame(trailers filter.Headers) []byte {
	var lines []string
	trailers.Range(func(name, value string) bool {
		lines = append(lines, strings.ToLower(name)+":"+value+"\r\n")
		return true
	})
	slices.Sort(lines)
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	out := make([]byte, 5, 5+n)
	out[0] = trailerFlag
	binary.BigEndian.PutUint32(out[1:], uint32(n))
	for _, l := range lines {
		out = append(out, l...)
	}
	return out
}

// binaryWriter passes the messages on and writes the trailers as the last frame.
type binaryWriter struct{ next filter.BodyWriter }

func (w binaryWriter) Write(p []byte) (int, error) { return w.next.Write(p) }
func (w binaryWriter) Flush() error                { return w.next.Flush() }

func (w binaryWriter) Close(trailers filter.Headers) error {
	if trailers != nil {
		if _, err := w.next.Write(trailersFrame(trailers)); err != nil {
			return err
		}
	}
	return w.next.Close(nil)
}

// textWriter base64-encodes every whole gRPC frame on its own, as Envoy does,
// holding a frame back until it is whole: a client decodes frame by frame.
type textWriter struct {
	next filter.BodyWriter
	// pending are the bytes of the current frame not encoded yet; need is how
	// many bytes of that frame, counted from pending's start, are still to be
	// encoded (-1: pending starts a frame whose header is not whole yet).
	pending []byte
	need    int
	out     []byte
}

// maxHeldFrame bounds what a text response holds of a frame not whole yet: a
// larger one is sent as it arrives, in groups of three bytes (base64 without
// padding), so an upstream announcing a huge frame cannot make the proxy
// buffer it.
const maxHeldFrame = 1 << 20

func newTextWriter(next filter.BodyWriter) *textWriter {
	return &textWriter{next: next, need: -1}
}

func (w *textWriter) Write(p []byte) (int, error) {
	w.pending = append(w.pending, p...)
	w.out = w.out[:0]
	at := 0
	for {
		rest := w.pending[at:]
		if w.need < 0 {
			if len(rest) < 5 {
				break
			}
			w.need = 5 + int(binary.BigEndian.Uint32(rest[1:]))
		}
		if len(rest) >= w.need {
			w.out = base64.StdEncoding.AppendEncode(w.out, rest[:w.need])
			at += w.need
			w.need = -1
			continue
		}
		if len(rest) >= maxHeldFrame {
			k := len(rest) / 3 * 3
			w.out = base64.StdEncoding.AppendEncode(w.out, rest[:k])
			at += k
			w.need -= k
		}
		break
	}
	w.pending = w.pending[:copy(w.pending, w.pending[at:])]
	if len(w.out) > 0 {
		if _, err := w.next.Write(w.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (w *textWriter) Flush() error { return w.next.Flush() }

// Close writes the trailers frame; an unfinished frame is dropped, as Envoy's
// frame decoder drops it.
func (w *textWriter) Close(trailers filter.Headers) error {
	if trailers != nil {
		if _, err := w.next.Write(base64.StdEncoding.AppendEncode(nil, trailersFrame(trailers))); err != nil {
			return err
		}
	}
	return w.next.Close(nil)
}

// discard drops the body of a response that is not gRPC: its status is in
// the headers.
type discard struct{ next filter.BodyWriter }

func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) Flush() error                { return d.next.Flush() }
func (d discard) Close(filter.Headers) error  { return d.next.Close(nil) }
