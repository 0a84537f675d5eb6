// Package grpcweb is Envoy's gRPC-Web HTTP filter (envoy.filters.http.grpc_web):
// a gRPC-Web request (a browser's, from a grpc-web library) becomes a gRPC
// request to the upstream, and the upstream's gRPC response becomes a
// gRPC-Web response.
//
// A request is gRPC-Web when its Content-Type is exactly one of
// application/grpc-web, application/grpc-web+proto, application/grpc-web-text
// or application/grpc-web-text+proto (Envoy's list); every other request
// passes untouched and costs one header lookup. Upstream, the request is
// application/grpc with "te: trailers" and, unless the client sent one,
// "grpc-accept-encoding: identity,deflate,gzip"; a text request's body is
// base64, decoded as it streams (a malformed one is refused with 400).
//
// The response (response.go) is gRPC-Web's: application/grpc-web+proto, or
// application/grpc-web-text+proto when the client's Accept asks for text, in
// which case every frame is base64 on its own; the trailers become the body's
// last frame; a trailers-only response keeps its status in the headers; and a
// response that is not gRPC (an error page, the proxy's own 503) gets the
// grpc-status of its HTTP status.
package grpcweb

import (
	"io"

	grpcwebv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// The media types of gRPC and gRPC-Web.
const (
	contentTypeGRPC             = "application/grpc"
	contentTypeGRPCWeb          = "application/grpc-web"
	contentTypeGRPCWebProto     = "application/grpc-web+proto"
	contentTypeGRPCWebText      = "application/grpc-web-text"
	contentTypeGRPCWebTextProto = "application/grpc-web-text+proto"
)

// defaultGRPCAcceptEncoding is what Envoy tells the upstream a gRPC-Web client
// accepts when it does not say.
const defaultGRPCAcceptEncoding = "identity,deflate,gzip"

// Factory makes the filter.
type Factory struct{}

// Name is the filter's Envoy name.
func (Factory) Name() string { return "envoy.filters.http.grpc_web" }

// ConfigType is the filter's configuration, which has no fields.
func (Factory) ConfigType() proto.Message { return &grpcwebv3.GrpcWeb{} }

// New converts the connection manager's configuration.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	var cfg grpcwebv3.GrpcWeb
	if err := filter.Unmarshal(a, &cfg); err != nil {
		return nil, err
	}
	return Filter{}, nil
}

// Filter bridges gRPC-Web requests to gRPC.
type Filter struct{}

// Selects gRPC-Web requests.
func (Filter) Selects(h filter.Headers) bool {
	_, ok := requestMode(h.Get("Content-Type"))
	return ok
}

// requestMode reports whether a request's content type is gRPC-Web, and
// whether its body is base64 (text).
func requestMode(contentType string) (text, ok bool) {
	switch contentType {
	case contentTypeGRPCWeb, contentTypeGRPCWebProto:
		return false, true
	case contentTypeGRPCWebText, contentTypeGRPCWebTextProto:
		return true, true
	}
	return false, false
}

// DecodeHeaders turns a gRPC-Web request into a gRPC one.
func (Filter) DecodeHeaders(s *filter.Stream, _ any) *filter.LocalReply {
	h := s.Request.Headers
	text, ok := requestMode(h.Get("Content-Type"))
	if !ok {
		return nil
	}
	// The body's length changes in text mode, and HTTP/2 carries none anyway.
	h.Del("Content-Length")
	h.Set("Content-Type", contentTypeGRPC)
	h.Set("Te", "trailers")
	if len(h.Values("Grpc-Accept-Encoding")) == 0 {
		h.Set("Grpc-Accept-Encoding", defaultGRPCAcceptEncoding)
	}
	mode := binaryResponse
	if accept := h.Get("Accept"); accept == contentTypeGRPCWebText || accept == contentTypeGRPCWebTextProto {
		mode = textResponse // the client asks for base64, whatever it sent
	}
	s.SetState(stateKey{}, mode)
	if text && s.Request.Body != nil {
		s.Request.Body.Replace(func(r io.Reader) io.Reader { return newBase64Decoder(r) })
	}
	return nil
}
