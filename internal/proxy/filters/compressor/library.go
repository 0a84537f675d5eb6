package compressor

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	zstdv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/compressor/v3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// encoder is a compression stream, reusable after Reset.
type encoder interface {
	io.Writer
	Flush() error
	Close() error
	Reset(w io.Writer)
}

// library is a compressor_library: its Content-Encoding and a pool of its
// streams (a gzip or brotli stream holds hundreds of KiB: one per response
// would dominate the request path's garbage).
type library struct {
	encoding string
	pool     sync.Pool // of *bodyWriter
	make     func() encoder
}

// Envoy's defaults: zlib's level 6 (DEFAULT_COMPRESSION), brotli quality 3,
// zstd level 3. Window sizes, memory levels, strategies and chunk sizes tune
// Envoy's libraries; they do not change what a client decodes, and Go's
// libraries take their own.
const (
	defaultGzipLevel   = 6
	defaultBrotli      = 3
	defaultZstdLevel   = 3
	maxBrotliQuality   = 11
	maxZstdLevelInZstd = 22
)

func newLibrary(tec *corev3.TypedExtensionConfig) (*library, error) {
	tc := tec.GetTypedConfig()
	if tc == nil {
		return nil, errors.New("typed_config is required")
	}
	switch {
	case tc.MessageIs(&gzipv3.Gzip{}):
		var g gzipv3.Gzip
		if err := tc.UnmarshalTo(&g); err != nil {
			return nil, err
		}
		level := int(g.GetCompressionLevel())
		if level == 0 {
			level = defaultGzipLevel
		}
		return &library{encoding: "gzip", make: func() encoder {
			w, _ := gzip.NewWriterLevel(nil, level) // level is 1 to 9: never an error
			return w
		}}, nil
	case tc.MessageIs(&brotliv3.Brotli{}):
		var b brotliv3.Brotli
		if err := tc.UnmarshalTo(&b); err != nil {
			return nil, err
		}
		quality := defaultBrotli
		if q := b.GetQuality(); q != nil {
			quality = int(q.GetValue())
		}
		if quality > maxBrotliQuality {
			return nil, fmt.Errorf("brotli quality %d: at most %d", quality, maxBrotliQuality)
		}
		return &library{encoding: "br", make: func() encoder { return brotli.NewWriterLevel(nil, quality) }}, nil
	case tc.MessageIs(&zstdv3.Zstd{}):
		var z zstdv3.Zstd
		if err := tc.UnmarshalTo(&z); err != nil {
			return nil, err
		}
		if z.GetDictionary() != nil {
			return nil, errors.New("zstd dictionary is not supported")
		}
		level := defaultZstdLevel
		if l := z.GetCompressionLevel(); l != nil {
			level = int(l.GetValue())
		}
		if level > maxZstdLevelInZstd {
			return nil, fmt.Errorf("zstd compression_level %d: at most %d", level, maxZstdLevelInZstd)
		}
		opts := []zstd.EOption{
			zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
			zstd.WithEncoderConcurrency(1), // one stream per response, written from one goroutine
			zstd.WithEncoderCRC(z.GetEnableChecksum()),
		}
		return &library{encoding: "zstd", make: func() encoder {
			w, _ := zstd.NewWriter(nil, opts...) // the options are valid: never an error
			return zstdEncoder{w}
		}}, nil
	}
	return nil, fmt.Errorf("%s is not supported (gzip, brotli and zstd are)", tc.GetTypeUrl())
}

// zstdEncoder adapts zstd's Reset, which returns nothing to report here.
type zstdEncoder struct{ *zstd.Encoder }

func (z zstdEncoder) Reset(w io.Writer) { z.Encoder.Reset(w) }

// writer returns a pooled writer compressing into next.
func (l *library) writer(next filter.BodyWriter) *bodyWriter {
	w, _ := l.pool.Get().(*bodyWriter)
	if w == nil {
		w = &bodyWriter{lib: l, enc: l.make()}
	}
	w.next = next
	w.enc.Reset(next)
	return w
}

// bodyWriter compresses a response's body into the writer toward the client.
type bodyWriter struct {
	lib  *library
	enc  encoder
	next filter.BodyWriter
}

func (w *bodyWriter) Write(p []byte) (int, error) { return w.enc.Write(p) }

// Flush sends what the stream holds: the upstream flushed, and a streamed
// response must reach the client now, not when a compression block fills.
func (w *bodyWriter) Flush() error {
	if err := w.enc.Flush(); err != nil {
		return err
	}
	return w.next.Flush()
}

// Close ends the compressed stream and returns the writer to the pool.
func (w *bodyWriter) Close(trailers filter.Headers) error {
	err := w.enc.Close()
	next := w.next
	w.next = nil
	w.enc.Reset(nil)
	w.lib.pool.Put(w)
	if err != nil {
		return err
	}
	return next.Close(trailers)
}
