package compressor

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	zstdv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/compressor/v3"
	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

func mustCompressor(t *testing.T, lib proto.Message, edit func(*compressorv3.Compressor)) *config {
	t.Helper()
	a, err := anypb.New(lib)
	if err != nil {
		t.Fatal(err)
	}
	c := &compressorv3.Compressor{CompressorLibrary: &corev3.TypedExtensionConfig{Name: "x", TypedConfig: a}}
	if edit != nil {
		edit(c)
	}
	cfg, err := newConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestChooseEncodingAsEnvoy(t *testing.T) {
	gz := &registered{c: &config{lib: &library{encoding: "gzip"}, types: typeSet(defaultContentTypes)}}
	br := &registered{c: &config{lib: &library{encoding: "br"}, types: typeSet([]string{"text/html"})}}
	brFirst := &registered{c: &config{lib: &library{encoding: "br"}, types: typeSet(defaultContentTypes), chooseFirst: true}}
	zs := &registered{c: &config{lib: &library{encoding: "zstd"}, types: typeSet(defaultContentTypes)}}
	for _, tc := range []struct {
		accept, ct string
		chain      []*registered
		want       string
	}{
		{"gzip", "text/plain", []*registered{gz}, "gzip"},
		{"gzip, deflate, br", "text/plain", []*registered{gz}, "gzip"},
		{"deflate", "text/plain", []*registered{gz}, identity},
		{"gzip;q=0", "text/plain", []*registered{gz}, identity},
		{"gzip;q=0, *", "text/plain", []*registered{gz}, identity},
		{"*", "text/plain", []*registered{gz}, "gzip"},
		{"identity;q=1, gzip;q=0.5", "text/plain", []*registered{gz}, identity},
		{"gzip;q=0.5, identity;q=1", "text/plain", []*registered{gz}, identity},
		{"identity, gzip", "text/plain", []*registered{gz}, identity}, // equal q: the first wins without choose_first
		{"gzip;q=abc", "text/plain", []*registered{gz}, identity},     // an unreadable q drops the token
		{"GZIP", "text/plain", []*registered{gz}, identity},           // Envoy compares names as they are
		{"gzip ; Q = 0.8", "text/plain", []*registered{gz}, "gzip"},
		{"", "text/plain", []*registered{gz}, identity},
		{"br, gzip", "application/json", []*registered{gz, br}, "gzip"}, // br does not take JSON
		{"br, gzip", "text/html", []*registered{gz, br}, "br"},
		{"gzip, br", "text/html", []*registered{gz, brFirst}, "br"}, // choose_first wins a tie
		{"*", "text/html", []*registered{br, gz}, "br"},             // * takes the first registered
		{"*, identity", "text/html", []*registered{zs}, identity},   // Envoy's map adds identity at order 0: it sorts before zstd
		{"*, identity", "text/html", []*registered{gz}, "gzip"},
	} {
		var chain []registered
		for _, r := range tc.chain {
			chain = append(chain, *r)
		}
		if got := choose(tc.accept, tc.ct, chain); got != tc.want {
			t.Errorf("Accept-Encoding %q, %s, %d compressors: %q, want %q", tc.accept, tc.ct, len(chain), got, tc.want)
		}
	}
}

// sink is the client's end of the body.
type sink struct {
	bytes.Buffer
	flushes int
	closed  bool
}

func (s *sink) Flush() error                { s.flushes++; return nil }
func (s *sink) Close(filter.Headers) error  { s.closed = true; return nil }
func (s *sink) Write(p []byte) (int, error) { return s.Buffer.Write(p) }

func request(c *config, accept string) *filter.Stream {
	s := filter.NewStream(context.Background(), &filter.Env{})
	s.Request.Headers = filter.HeaderMap{}
	if accept != "" {
		s.Request.Headers.Set("Accept-Encoding", accept)
	}
	c.DecodeHeaders(s, nil)
	return s
}

func TestResponseRules(t *testing.T) {
	c := mustCompressor(t, &gzipv3.Gzip{}, nil)
	body := strings.Repeat("compress me ", 20)
	for _, tc := range []struct {
		name     string
		accept   string
		status   int
		headers  map[string]string
		end      bool
		compress bool
		vary     bool
	}{
		{"compressible", "gzip", 200, map[string]string{"Content-Type": "text/html; charset=utf-8", "Content-Length": "240"}, false, true, true},
		{"no content type", "gzip", 200, nil, false, true, true},
		{"no Accept-Encoding", "", 200, map[string]string{"Content-Type": "text/plain"}, false, false, true},
		{"too short", "gzip", 200, map[string]string{"Content-Type": "text/plain", "Content-Length": "29"}, false, false, false},
		{"image", "gzip", 200, map[string]string{"Content-Type": "image/png"}, false, false, false},
		{"encoded already", "gzip", 200, map[string]string{"Content-Type": "text/plain", "Content-Encoding": "br"}, false, false, false},
		{"no-transform", "gzip", 200, map[string]string{"Content-Type": "text/plain", "Cache-Control": "public, No-Transform"}, false, false, false},
		{"no body", "gzip", 200, map[string]string{"Content-Type": "text/plain"}, true, false, true},
		{"error status", "gzip", 503, map[string]string{"Content-Type": "text/plain"}, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := filter.HeaderMap{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			h.Set("Etag", `"strong"`)
			out := &sink{}
			w := c.EncodeResponse(request(c, tc.accept), nil, &filter.ResponseHead{Status: tc.status, Headers: h, EndStream: tc.end}, out)
			if (w != nil) != tc.compress {
				t.Fatalf("compressed: %v, want %v", w != nil, tc.compress)
			}
			if got := h.Get("Vary") == "Accept-Encoding"; got != tc.vary {
				t.Errorf("Vary %q, want it: %v", h.Get("Vary"), tc.vary)
			}
			if !tc.compress {
				if h.Get("Etag") == "" || h.Get("Content-Encoding") == "gzip" {
					t.Errorf("an uncompressed response lost its ETag or got an encoding: %v", h)
				}
				return
			}
			if h.Get("Content-Encoding") != "gzip" || h.Get("Content-Length") != "" || h.Get("Etag") != "" {
				t.Errorf("headers %v: want Content-Encoding gzip, no Content-Length, the strong ETag removed", h)
			}
			_, _ = w.Write([]byte(body))
			_ = w.Close(nil)
			zr, err := gzip.NewReader(&out.Buffer)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := io.ReadAll(zr); string(got) != body || !out.closed {
				t.Errorf("decoded %q (closed %v)", got, out.closed)
			}
		})
	}
}

func TestEtagAndCodesOptions(t *testing.T) {
	c := mustCompressor(t, &gzipv3.Gzip{}, func(c *compressorv3.Compressor) {
		c.ResponseDirectionConfig = &compressorv3.Compressor_ResponseDirectionConfig{WeakenEtagOnCompress: true, UncompressibleResponseCodes: []uint32{206}}
	})
	h := filter.HeaderMap{"Etag": {`"v1"`}, "Vary": {"Origin"}}
	if w := c.EncodeResponse(request(c, "gzip"), nil, &filter.ResponseHead{Status: 200, Headers: h}, &sink{}); w == nil {
		t.Fatal("not compressed")
	}
	if h.Get("Etag") != `W/"v1"` || h.Get("Vary") != "Origin, Accept-Encoding" {
		t.Errorf("headers %v: want a weakened ETag and Accept-Encoding added to Vary", h)
	}
	if w := c.EncodeResponse(request(c, "gzip"), nil, &filter.ResponseHead{Status: 206, Headers: filter.HeaderMap{}}, &sink{}); w != nil {
		t.Error("206 is uncompressible here")
	}
	d := mustCompressor(t, &gzipv3.Gzip{}, func(c *compressorv3.Compressor) {
		c.ResponseDirectionConfig = &compressorv3.Compressor_ResponseDirectionConfig{DisableOnEtagHeader: true, RemoveAcceptEncodingHeader: true}
	})
	s := request(d, "gzip")
	if s.Request.Headers.Get("Accept-Encoding") != "" {
		t.Error("remove_accept_encoding_header left the header for the upstream")
	}
	if w := d.EncodeResponse(s, nil, &filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{"Etag": {"W/\"x\""}}}, &sink{}); w != nil {
		t.Error("disable_on_etag_header compressed a response with an ETag")
	}
	if w := d.EncodeResponse(s, nil, &filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{}}, &sink{}); w == nil {
		t.Error("the removed Accept-Encoding was not remembered for the response")
	}
}

func TestLibrariesRoundTripAndStream(t *testing.T) {
	decoders := map[string]func(io.Reader) io.Reader{
		"gzip": func(r io.Reader) io.Reader { z, _ := gzip.NewReader(r); return z },
		"br":   func(r io.Reader) io.Reader { return brotli.NewReader(r) },
		"zstd": func(r io.Reader) io.Reader { z, _ := zstd.NewReader(r); return z },
	}
	for _, lib := range []proto.Message{&gzipv3.Gzip{}, &brotliv3.Brotli{}, &zstdv3.Zstd{}} {
		c := mustCompressor(t, lib, nil)
		for range 3 { // pooled writers are reused
			out := &sink{}
			w := c.EncodeResponse(request(c, "gzip, br, zstd"), nil, &filter.ResponseHead{Status: 200, Headers: filter.HeaderMap{}}, out)
			if w == nil {
				t.Fatalf("%s: not compressed", c.lib.encoding)
			}
			_, _ = w.Write([]byte("data: first event\n\n"))
			_ = w.Flush()
			if out.Len() == 0 || out.flushes != 1 {
				t.Fatalf("%s: a flush sent %d bytes (%d flushes): a stream would stall", c.lib.encoding, out.Len(), out.flushes)
			}
			_, _ = w.Write([]byte("data: second event\n\n"))
			_ = w.Close(nil)
			got, err := io.ReadAll(decoders[c.lib.encoding](&out.Buffer))
			if err != nil || string(got) != "data: first event\n\ndata: second event\n\n" {
				t.Fatalf("%s: decoded %q, %v", c.lib.encoding, got, err)
			}
		}
	}
}
