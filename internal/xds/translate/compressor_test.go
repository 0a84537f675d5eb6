package translate

import (
	"testing"

	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
)

// Every connection manager compresses first, as Contour's, with the library
// Global.Compression names; disabled leaves the filter out.
func TestCompressorFilter(t *testing.T) {
	for _, c := range []struct {
		compression Compression
		library     string // the library's type URL suffix; "" for no filter
	}{
		{"", "gzip.compressor.v3.Gzip"},
		{CompressionGzip, "gzip.compressor.v3.Gzip"},
		{CompressionBrotli, "brotli.compressor.v3.Brotli"},
		{CompressionZstd, "zstd.compressor.v3.Zstd"},
		{CompressionDisabled, ""},
	} {
		chain := httpFilterChain(nil, Options{Global: Global{Compression: c.compression}})
		first := chain[0]
		if c.library == "" {
			if first.GetName() == compressorFilter.name {
				t.Errorf("%q: the compressor is in the chain", c.compression)
			}
			continue
		}
		if first.GetName() != compressorFilter.name {
			t.Fatalf("%q: the first filter is %q, want the compressor", c.compression, first.GetName())
		}
		var cfg compressorv3.Compressor
		if err := first.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
			t.Fatal(err)
		}
		if err := cfg.ValidateAll(); err != nil {
			t.Errorf("%q: %v", c.compression, err)
		}
		if got := cfg.GetCompressorLibrary().GetTypedConfig().GetTypeUrl(); got != "type.googleapis.com/envoy.extensions.compression."+c.library {
			t.Errorf("%q: library %s", c.compression, got)
		}
		if n := len(cfg.GetResponseDirectionConfig().GetCommonConfig().GetContentType()); n != len(compressedTypes) {
			t.Errorf("%q: %d content types", c.compression, n)
		}
	}
	if err := CheckGlobal(Global{Compression: "deflate"}); err == nil {
		t.Error("CheckGlobal accepted compression deflate")
	}
}
