package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/dag"
)

// extAuthzFilter is external authorization (HTTPProxy's virtualhost.authorization):
// in the connection manager of an authorized HTTPS server name only, disabled there
// by default and enabled by each route of the authorized host (a FilterConfig), so that
// other hosts served on the same connections (a wildcard certificate's Also) and
// unmatched requests are not checked by a server that is not theirs.
var extAuthzFilter = httpFilter{
	name:     wellknown.HTTPExternalAuthorization,
	listener: extAuthzListener,
	route:    extAuthzRoute,
	disabled: true,
}

// extAuthzListener asks the ExtensionService's cluster over gRPC v3; a failure to get
// an answer is a 403, or lets the request through with failOpen (Envoy's
// status_on_error and failure_mode_allow).
func extAuthzListener(svh *dag.SecureVirtualHost, _ Options) *anypb.Any {
	if svh == nil || svh.Authorization == nil {
		return nil
	}
	a := svh.Authorization
	grpc := &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: a.Cluster.Name}},
	}
	if a.Timeout != nil {
		grpc.Timeout = durationpb.New(*a.Timeout)
	}
	return mustAny(&extauthzv3.ExtAuthz{
		Services:               &extauthzv3.ExtAuthz_GrpcService{GrpcService: grpc},
		TransportApiVersion:    corev3.ApiVersion_V3,
		FailureModeAllow:       a.FailOpen,
		StatusOnError:          &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
		IncludePeerCertificate: true,
	})
}

// extAuthzRoute enables the filter on a route of an authorized host, with the route's
// context, or says it is disabled there.
func extAuthzRoute(r *dag.Route, _ *dag.VirtualHost, _ Options) *anypb.Any {
	a := r.Authorization
	switch {
	case a == nil:
		return nil
	case a.Disabled:
		return mustAny(&extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_Disabled{Disabled: true}})
	}
	per := &extauthzv3.ExtAuthzPerRoute{Override: &extauthzv3.ExtAuthzPerRoute_CheckSettings{
		CheckSettings: &extauthzv3.CheckSettings{ContextExtensions: a.Context},
	}}
	return mustAny(&routev3.FilterConfig{Config: mustAny(per)})
}
