package translate

import (
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
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

// extAuthzListener is the filter of an authorized HTTPS server name, or of the plain
// listener when the installation has a global authorization (svh nil).
func extAuthzListener(svh *dag.SecureVirtualHost, opts Options) *anypb.Any {
	a := opts.globalAuthorization()
	if svh != nil {
		a = svh.Authorization
	}
	if a == nil {
		return nil
	}
	return extAuthzConfig(a)
}

// extAuthzConfig asks the ExtensionService's cluster over gRPC v3, or with plain
// HTTP requests (serviceType http); a failure to get an answer is a 403, or lets the
// request through with failOpen (Envoy's status_on_error and failure_mode_allow).
func extAuthzConfig(a *dag.Authorization) *anypb.Any {
	out := &extauthzv3.ExtAuthz{
		TransportApiVersion: corev3.ApiVersion_V3,
		FailureModeAllow:    a.FailOpen,
		// The upstream of a request let through unchecked is told so
		// (x-envoy-auth-failure-mode-allowed: true), by Envoy and the embedded
		// proxy alike.
		FailureModeAllowHeaderAdd: a.FailOpen,
		StatusOnError:             &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
		IncludePeerCertificate:    true,
		WithRequestBody:           extAuthzBody(a.Body),
	}
	if a.HTTP != nil {
		out.Services = extAuthzHTTPService(a)
		if m := a.HTTP.AllowedAuthorizationHeaders; len(m) > 0 {
			// The filter's allowed_headers, which replaced http_service's
			// authorization_request.allowed_headers (as Contour emits it).
			out.AllowedHeaders = headerNameMatchers(m)
		}
		return mustAny(out)
	}
	grpc := &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: a.Cluster.Name}},
	}
	if a.Timeout != nil {
		grpc.Timeout = durationpb.New(*a.Timeout)
	}
	out.Services = &extauthzv3.ExtAuthz_GrpcService{GrpcService: grpc}
	return mustAny(out)
}

// extAuthzHTTPService asks the cluster with HTTP requests. server_uri's URI is
// required but unused (the cluster is where requests go; the client's Host is kept),
// and its timeout is required: a host without responseTimeout gets the gRPC
// service's default, Envoy's 200ms.
func extAuthzHTTPService(a *dag.Authorization) *extauthzv3.ExtAuthz_HttpService {
	timeout := defaultAuthTimeout
	if a.Timeout != nil {
		timeout = *a.Timeout
	}
	hs := &extauthzv3.HttpService{
		ServerUri: &corev3.HttpUri{
			Uri:              "http://" + strings.ReplaceAll(a.Cluster.Name, "/", ".") + "/",
			HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: a.Cluster.Name},
			Timeout:          durationpb.New(timeout),
		},
		PathPrefix: a.HTTP.PathPrefix,
	}
	if m := a.HTTP.AllowedUpstreamHeaders; len(m) > 0 {
		hs.AuthorizationResponse = &extauthzv3.AuthorizationResponse{AllowedUpstreamHeaders: headerNameMatchers(m)}
	}
	return &extauthzv3.ExtAuthz_HttpService{HttpService: hs}
}

// defaultAuthTimeout is Envoy's timeout of a gRPC check without one.
const defaultAuthTimeout = 200 * time.Millisecond

func headerNameMatchers(ms []dag.HeaderNameMatch) *matcherv3.ListStringMatcher {
	out := &matcherv3.ListStringMatcher{}
	for _, m := range ms {
		out.Patterns = append(out.Patterns, stringMatcher(m.Kind, m.Value, m.IgnoreCase))
	}
	return out
}

// extAuthzBody is with_request_body.
func extAuthzBody(b *dag.AuthorizationBody) *extauthzv3.BufferSettings {
	if b == nil {
		return nil
	}
	return &extauthzv3.BufferSettings{MaxRequestBytes: b.MaxRequestBytes, AllowPartialMessage: b.AllowPartialMessage, PackAsBytes: b.PackAsBytes}
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

// globalAuthorization is the installation's authorization server, nil without one.
func (o Options) globalAuthorization() *dag.Authorization {
	if o.extensions == nil {
		return nil
	}
	return o.extensions.Authorization
}
