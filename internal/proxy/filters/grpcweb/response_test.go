package grpcweb

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// sink is the client's end of the body writers.
type sink struct {
	body     strings.Builder
	writes   []string
	flushes  int
	closed   bool
	trailers filter.Headers
}

func (s *sink) Write(p []byte) (int, error) {
	s.writes = append(s.writes, string(p))
	return s.body.Write(p)
}
func (s *sink) Flush() error { s.flushes++; return nil }
func (s *sink) Close(t filter.Headers) error {
	s.closed, s.trailers = true, t
	return nil
}

func frame(flag byte, data string) string {
	n := len(data)
	return string([]byte{flag, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + data
}

func grpcWebStream(mode responseMode) *filter.Stream {
	s := filter.NewStream(context.Background(), nil)
	if mode != 0 {
		s.SetState(stateKey{}, mode)
	}
	return s
}

// Binary mode passes messages on and writes the trailers as the last frame: lower-case
// name:value CRLF lines; the client gets no HTTP trailers.
func TestBinaryResponse(t *testing.T) {
	h := filter.HeaderMap{"Content-Type": {"application/grpc"}, "Content-Length": {"7"}, "Trailer": {"Grpc-Status"}}
	head := &filter.ResponseHead{Status: 200, Headers: h}
	out := &sink{}
	w := Filter{}.EncodeResponse(grpcWebStream(binaryResponse), nil, head, out)
	if w == nil || h.Get("Content-Type") != "application/grpc-web+proto" || h.Get("Content-Length") != "" || h.Get("Trailer") != "" {
		t.Fatalf("writer %v, headers %v", w, h)
	}
	msg := frame(0, "hi")
	_, _ = w.Write([]byte(msg))
	_ = w.Flush()
	_ = w.Close(filter.HeaderMap{"Grpc-Status": {"0"}, "Grpc-Message": {"ok"}, "X-Extra": {"a", "b"}})
	want := msg + frame(0x80, "grpc-message:ok\r\ngrpc-status:0\r\nx-extra:a\r\nx-extra:b\r\n")
	if out.body.String() != want || !out.closed || out.trailers != nil || out.flushes != 1 {
		t.Errorf("body %q (closed %v, trailers %v, flushes %d), want %q", out.body.String(), out.closed, out.trailers, out.flushes, want)
	}
}

// Text mode encodes each whole frame on its own, whatever the upstream's writes: a frame
// split across writes waits for its end, two in one write are two padded runs.
func TestTextResponse(t *testing.T) {
	h := filter.HeaderMap{"Content-Type": {"application/grpc+proto"}}
	out := &sink{}
	w := Filter{}.EncodeResponse(grpcWebStream(textResponse), nil, &filter.ResponseHead{Status: 200, Headers: h}, out)
	if h.Get("Content-Type") != "application/grpc-web-text+proto" {
		t.Fatalf("content type %q", h.Get("Content-Type"))
	}
	one, two, three := frame(0, "a"), frame(0, "bc"), frame(0, strings.Repeat("d", 300))
	in := one + two + three
	for _, cut := range []string{in[:3], in[3:8], in[8:20], in[20:]} {
		_, _ = w.Write([]byte(cut))
	}
	_ = w.Close(filter.HeaderMap{"Grpc-Status": {"0"}})
	enc := base64.StdEncoding.EncodeToString
	want := []string{enc([]byte(one)), enc([]byte(two)), enc([]byte(three)), enc([]byte(frame(0x80, "grpc-status:0\r\n")))}
	if got := out.writes; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("writes %q, want %q", got, want)
	}
	out = &sink{}
	w = Filter{}.EncodeResponse(grpcWebStream(textResponse), nil, &filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{"Content-Type": {"application/grpc"}}}, out)
	_, _ = w.Write([]byte(one + two))
	if out.body.String() != enc([]byte(one))+enc([]byte(two)) {
		t.Errorf("two frames in one write: %q", out.body.String())
	}
}

// A text response holds at most maxHeldFrame bytes of a frame that is not whole:
// a larger frame goes out as it arrives, in groups of three bytes, and the whole
// still decodes to the upstream's bytes.
func TestTextResponseHugeFrame(t *testing.T) {
	out := &sink{}
	w := Filter{}.EncodeResponse(grpcWebStream(textResponse), nil, &filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{"Content-Type": {"application/grpc"}}}, out)
	huge := frame(0, strings.Repeat("0123456789", 300_001)) // 3,000,010 bytes of data
	in := huge + frame(0, "after")
	const chunk = 64 << 10
	for at := 0; at < len(in); at += chunk {
		_, _ = w.Write([]byte(in[at:min(at+chunk, len(in))]))
		if held := len(w.(*textWriter).pending); held > maxHeldFrame+chunk {
			t.Fatalf("after %d bytes the writer holds %d", at+chunk, held)
		}
		if at+chunk == 2*maxHeldFrame && out.body.Len() == 0 {
			t.Fatal("2 MiB of a frame in, nothing sent")
		}
	}
	_ = w.Close(nil)
	got, err := decodeConcatenated(out.body.String())
	if err != nil || got != in {
		t.Errorf("decoded %d bytes (err %v), want the %d the upstream sent", len(got), err, len(in))
	}
}

// decodeConcatenated decodes base64 written in pieces, each padded at its end
// (as a grpc-web-text client reads a response).
func decodeConcatenated(s string) (string, error) {
	var b strings.Builder
	for len(s) > 0 {
		n := strings.IndexByte(s, '=')
		if n < 0 {
			n = len(s)
		} else {
			for n < len(s) && s[n] == '=' {
				n++
			}
		}
		d, err := base64.StdEncoding.DecodeString(s[:n])
		if err != nil {
			return b.String(), err
		}
		b.Write(d)
		s = s[n:]
	}
	return b.String(), nil
}

// Responses that are not gRPC get their HTTP status's gRPC status and lose the body;
// a bodiless one keeps no status, as in Envoy; a request that was not gRPC-Web is left
// alone; an upstream that answers gRPC-Web itself or trailers-only is bridged.
func TestResponseKinds(t *testing.T) {
	for _, c := range []struct {
		name       string
		mode       responseMode
		head       filter.ResponseHead
		wrapped    bool
		grpcStatus string
	}{
		{"not gRPC-Web", 0, filter.ResponseHead{Status: 503, Headers: filter.HeaderMap{"Content-Type": {"text/plain"}}}, false, ""},
		{"gRPC", binaryResponse, filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{"Content-Type": {"application/grpc"}}}, true, ""},
		{"gRPC-Web upstream", binaryResponse, filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{"Content-Type": {"Application/gRPC-Web+proto; x=y"}}}, true, ""},
		{"trailers-only", binaryResponse, filter.ResponseHead{Status: 200, EndStream: true, Headers: filter.HeaderMap{"Grpc-Status": {"5"}}}, false, "5"},
		{"503 text", binaryResponse, filter.ResponseHead{Status: 503, Headers: filter.HeaderMap{"Content-Type": {"text/plain"}}}, true, "14"},
		{"gRPC content type, 500", textResponse, filter.ResponseHead{Status: 500, Headers: filter.HeaderMap{"Content-Type": {"application/grpc"}}}, true, "2"},
		{"application/grpc-foo", binaryResponse, filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{"Content-Type": {"application/grpc-foo"}}}, true, "2"},
		{"403", binaryResponse, filter.ResponseHead{Status: 403, Headers: filter.HeaderMap{}}, true, "7"},
		{"401", binaryResponse, filter.ResponseHead{Status: 401, Headers: filter.HeaderMap{}}, true, "16"},
		{"429", binaryResponse, filter.ResponseHead{Status: 429, Headers: filter.HeaderMap{}}, true, "14"},
		{"400", binaryResponse, filter.ResponseHead{Status: 400, Headers: filter.HeaderMap{}}, true, "13"},
		{"404", binaryResponse, filter.ResponseHead{Status: 404, Headers: filter.HeaderMap{}}, true, "12"},
		{"bodiless 404", binaryResponse, filter.ResponseHead{Status: 404, EndStream: true, Headers: filter.HeaderMap{}}, false, ""},
	} {
		out := &sink{}
		w := Filter{}.EncodeResponse(grpcWebStream(c.mode), nil, &c.head, out)
		if (w != nil) != c.wrapped || c.head.Headers.Get("Grpc-Status") != c.grpcStatus {
			t.Errorf("%s: wrapped %v, grpc-status %q; want %v, %q", c.name, w != nil, c.head.Headers.Get("Grpc-Status"), c.wrapped, c.grpcStatus)
		}
		if c.grpcStatus != "" && w != nil {
			_, _ = w.Write([]byte("<html>error page</html>"))
			_ = w.Close(nil)
			if out.body.Len() != 0 || !out.closed {
				t.Errorf("%s: body %q reached the client (closed %v)", c.name, out.body.String(), out.closed)
			}
		}
	}
}
