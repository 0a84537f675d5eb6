package translate

import (
	grpcwebv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/dag"
)

// GRPCWebFilterName is Envoy's gRPC-Web filter.
const GRPCWebFilterName = "envoy.filters.http.grpc_web"

// grpcWebFilter is in every connection manager, as in Contour: a gRPC-Web
// request (a browser's) reaching a route to a gRPC service (protocol h2c or
// h2) is bridged to gRPC and its response back. It has no configuration and
// leaves every other request alone.
var grpcWebFilter = httpFilter{
	name:     GRPCWebFilterName,
	listener: func(*dag.SecureVirtualHost, Options) *anypb.Any { return mustAny(&grpcwebv3.GrpcWeb{}) },
}
