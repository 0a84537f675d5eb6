package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	brotliv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/brotli/compressor/v3"
	gzipv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	zstdv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/zstd/compressor/v3"
	compressorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/dag"
)

// compressorFilter compresses responses in every connection manager, as
// Contour's: one compressor library (Global.Compression), Envoy's defaults
// for everything else (30 bytes at least, no ETag refusal), and Contour's
// content types: Envoy's default list and the gRPC-Web ones.
var compressorFilter = httpFilter{
	name:     "envoy.filters.http.compressor",
	listener: compressorConfig,
}

// compressedTypes are the content types Contour compresses.
var compressedTypes = []string{
	"text/html", "text/plain", "text/css", "application/javascript", "application/x-javascript",
	"text/javascript", "text/x-javascript", "text/ecmascript", "text/js", "text/jscript",
	"text/x-js", "application/ecmascript", "application/x-json", "application/xml",
	"application/json", "image/svg+xml", "text/xml", "application/xhtml+xml",
	"application/grpc-web", "application/grpc-web+proto", "application/grpc-web+json", "application/grpc-web+thrift",
	"application/grpc-web-text", "application/grpc-web-text+proto", "application/grpc-web-text+thrift",
}

func compressorConfig(_ *dag.SecureVirtualHost, opts Options) *anypb.Any {
	var name string
	var library proto.Message
	switch opts.Compression {
	case CompressionDisabled:
		return nil
	case CompressionBrotli:
		name, library = "brotli", &brotliv3.Brotli{}
	case CompressionZstd:
		name, library = "zstd", &zstdv3.Zstd{}
	default:
		name, library = "gzip", &gzipv3.Gzip{}
	}
	return mustAny(&compressorv3.Compressor{
		CompressorLibrary: &corev3.TypedExtensionConfig{Name: name, TypedConfig: mustAny(library)},
		ResponseDirectionConfig: &compressorv3.Compressor_ResponseDirectionConfig{
			CommonConfig: &compressorv3.Compressor_CommonDirectionConfig{ContentType: compressedTypes},
		},
	})
}
