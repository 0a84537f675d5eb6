package grpcweb

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/types/known/anypb"

	grpcwebv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// chunked yields data in the given chunk lengths, then the rest.
type chunked struct {
	data  []byte
	sizes []int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n, c.sizes = min(c.sizes[0], n), c.sizes[1:]
	}
	n = copy(p[:min(n, len(p))], c.data)
	c.data = c.data[n:]
	return n, nil
}

// The decoder gives the whole message whatever the chunks' boundaries (inside a
// quantum, one byte at a time, padding in the middle), and refuses what Envoy refuses
// with its 400: a body ending inside a quantum, characters that are not base64.
func TestBase64Decoder(t *testing.T) {
	msg := []byte("\x00\x00\x00\x00\x05hello, gRPC-Web")
	enc := base64.StdEncoding.EncodeToString(msg)
	two := base64.StdEncoding.EncodeToString([]byte("ab")) + base64.StdEncoding.EncodeToString([]byte("c")) +
		base64.StdEncoding.EncodeToString([]byte("defg"))
	for _, c := range []struct {
		name    string
		src     io.Reader
		want    string
		details string // the refusal's; "" for none
	}{
		{"whole", strings.NewReader(enc), string(msg), ""},
		{"split mid-quantum", &chunked{data: []byte(enc), sizes: []int{1, 2, 5, 3, 7}}, string(msg), ""},
		{"one byte at a time", iotest.OneByteReader(strings.NewReader(enc)), string(msg), ""},
		{"padded pieces", &chunked{data: []byte(two), sizes: []int{3, 6, 2}}, "abcdefg", ""},
		{"padded pieces at once", strings.NewReader(two), "abcdefg", ""},
		{"empty", strings.NewReader(""), "", ""},
		{"ends inside a quantum", strings.NewReader(enc + "QQ"), "", "grpc_base_64_decode_failed_bad_size"},
		{"not base64", strings.NewReader("QUJD*EVG"), "", "grpc_base_64_decode_failed"},
		{"padding only", strings.NewReader("===="), "", "grpc_base_64_decode_failed"},
		{"data after padding", strings.NewReader("QQ=A"), "", "grpc_base_64_decode_failed"},
		// Go's base64 skips line breaks; Envoy's decoder refuses them, as any other byte
		// outside the alphabet.
		{"line breaks", strings.NewReader("QUJD\r\n\r\nRA=="), "", "grpc_base_64_decode_failed"},
		{"line break in a quantum", strings.NewReader("QU\nJ"), "", "grpc_base_64_decode_failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := io.ReadAll(newBase64Decoder(c.src))
			var re *filter.ReplyError
			switch {
			case c.details == "" && err != nil:
				t.Fatalf("error %v, want %q", err, c.want)
			case c.details == "" && string(got) != c.want:
				t.Fatalf("decoded %q, want %q", got, c.want)
			case c.details != "" && !errors.As(err, &re):
				t.Fatalf("decoded %q, error %v; want a refusal", got, err)
			case c.details != "" && (re.Reply.Status != http.StatusBadRequest || re.Reply.Details != c.details ||
				re.Reply.Body != "Bad gRPC-web request, invalid base64 data."):
				t.Fatalf("refusal %+v, want 400 %s", re.Reply, c.details)
			}
		})
	}
}

// A body longer than the decoder's read size streams through intact.
func TestBase64DecoderLong(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789abcdef"), 10_000)
	got, err := io.ReadAll(newBase64Decoder(&chunked{data: []byte(base64.StdEncoding.EncodeToString(msg)), sizes: []int{7, 40_001, 5}}))
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("decoded %d bytes (equal %v), error %v; want %d", len(got), bytes.Equal(got, msg), err, len(msg))
	}
}

// A source's error reaches the router after what was decoded before it.
func TestBase64DecoderSourceError(t *testing.T) {
	boom := errors.New("client went away")
	got, err := io.ReadAll(newBase64Decoder(io.MultiReader(strings.NewReader("QUJD"), iotest.ErrReader(boom))))
	if string(got) != "ABC" || !errors.Is(err, boom) {
		t.Fatalf("decoded %q, error %v; want ABC then the source's error", got, err)
	}
}

func newFilter(t *testing.T) filter.Filter {
	t.Helper()
	a, err := anypb.New(&grpcwebv3.GrpcWeb{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Factory{}.New(a)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Envoy's four content types are gRPC-Web, nothing else is (+json, a parameter, grpc
// itself); a gRPC-Web request goes upstream as gRPC: content type, te, grpc-accept-encoding
// unless the client sent one, no Content-Length; a text one's body decoded.
func TestDecodeHeaders(t *testing.T) {
	f := newFilter(t)
	for _, ct := range []string{"application/grpc-web+json", "application/grpc-web; charset=utf-8", "application/grpc", "application/json", ""} {
		h := filter.HeaderMap{"Content-Type": {ct}}
		if f.(filter.Selective).Selects(h) {
			t.Errorf("content type %q is selected as gRPC-Web", ct)
		}
	}
	for _, c := range []struct {
		ct, accept string
		text       bool
	}{
		{"application/grpc-web", "", false},
		{"application/grpc-web+proto", "", false},
		{"application/grpc-web-text", "application/grpc-web-text", true},
		{"application/grpc-web-text+proto", "", true},
	} {
		h := filter.HeaderMap{"Content-Type": {c.ct}, "Content-Length": {"12"}}
		if !f.(filter.Selective).Selects(h) {
			t.Errorf("content type %q is not selected", c.ct)
		}
		s := filter.NewStream(context.Background(), nil)
		s.Request.Headers = h
		body := "\x00\x00\x00\x00\x01x"
		sent := body
		if c.text {
			sent = base64.StdEncoding.EncodeToString([]byte(body))
		}
		client := strings.NewReader(sent) // read by filters, then by the router
		s.SetBody(client, int64(len(sent)))
		if lr := f.DecodeHeaders(s, nil); lr != nil {
			t.Fatalf("%s: replied %+v", c.ct, lr)
		}
		if h.Get("Content-Type") != "application/grpc" || h.Get("Te") != "trailers" ||
			h.Get("Grpc-Accept-Encoding") != "identity,deflate,gzip" || h.Values("Content-Length") != nil {
			t.Errorf("%s: upstream headers %v", c.ct, h)
		}
		fwd, length, changed := s.ForwardBody(client)
		if !changed {
			fwd, length = client, int64(len(sent))
		}
		got, err := io.ReadAll(fwd)
		if string(got) != body || err != nil || (c.text && length != -1) {
			t.Errorf("%s: upstream body %q (length %d), %v; want %q", c.ct, got, length, err, body)
		}
	}
	h := filter.HeaderMap{"Content-Type": {"application/grpc-web"}, "Grpc-Accept-Encoding": {"gzip"}}
	s := filter.NewStream(context.Background(), nil)
	s.Request.Headers = h
	f.DecodeHeaders(s, nil)
	if got := h.Values("Grpc-Accept-Encoding"); len(got) != 1 || got[0] != "gzip" {
		t.Errorf("the client's grpc-accept-encoding became %q", got)
	}
}
