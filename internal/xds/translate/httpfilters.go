package translate

import (
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/dag"
)

// httpFilter is one HTTP filter of the connection managers Portico emits, in
// the one order of httpFilters. Policies are per virtual host and per route
// (typed_per_filter_config); a filter without one for the request's route
// does nothing, and the embedded proxy skips it at no cost.
type httpFilter struct {
	// name is the filter's Envoy name: the HttpFilter's and the key of its
	// typed_per_filter_config.
	name string
	// listener is the filter's configuration in a connection manager: a
	// plain HTTP listener's (svh nil), whose configuration must not depend on
	// its hosts (translation is incremental: hosts come and go without the
	// listener changing), or one HTTPS server name's. nil: the filter is not
	// in that connection manager.
	listener func(svh *dag.SecureVirtualHost, opts Options) *anypb.Any
	// vhost and route are its per-route configurations; nil: none.
	vhost func(vh *dag.VirtualHost, opts Options) *anypb.Any
	route func(r *dag.Route, vh *dag.VirtualHost, opts Options) *anypb.Any
	// disabled filters run only on the routes whose configuration enables them
	// (HttpFilter.disabled, enabled by a FilterConfig), in the connection managers
	// of HTTPS server names. The plain listener's has such a filter only for the
	// whole installation (the global authorization): it runs for every request there,
	// but on the routes that disable it.
	disabled bool
}

// httpFilters is the order requests meet the filters in, the router last:
// gRPC-Web before CORS, as in Contour (a preflight is not gRPC-Web, so CORS
// answers it; the bridged responses get CORS's headers); CORS before the
// checks, since a preflight carries no credentials to check; then the
// checks that refuse a request from who sends it (IP rules, JWT, external
// authorization), then the rate limits, which so count only requests that
// would be served. The compressor is first, where Contour puts it: the last
// encoder, it compresses what every other filter left of a response, local
// replies included. Lua (cookie rewrites) works on responses only; it comes
// next so that its changes come after the other filters', as encoders run in
// reverse.
var httpFilters = []httpFilter{
	compressorFilter,
	luaFilter,
	grpcWebFilter,
	corsFilter,
	rbacFilter,
	jwtAuthnFilter,
	extAuthzFilter,
	localRateLimitFilter,
	rateLimitFilter,
}

// httpFilterChain is the http_filters of a connection manager: a plain
// listener's (svh nil) or an HTTPS server name's.
func httpFilterChain(svh *dag.SecureVirtualHost, opts Options) []*hcmv3.HttpFilter {
	var out []*hcmv3.HttpFilter
	for _, f := range httpFilters {
		if f.listener == nil {
			continue
		}
		if cfg := f.listener(svh, opts); cfg != nil {
			out = append(out, &hcmv3.HttpFilter{Name: f.name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: cfg}, Disabled: f.disabled && svh != nil})
		}
	}
	return append(out, &hcmv3.HttpFilter{
		Name:       wellknown.Router,
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
	})
}

// vhostFilterConfig is a virtual host's typed_per_filter_config; nil: none.
func vhostFilterConfig(vh *dag.VirtualHost, opts Options) map[string]*anypb.Any {
	var out map[string]*anypb.Any
	for _, f := range httpFilters {
		if f.vhost == nil {
			continue
		}
		if cfg := f.vhost(vh, opts); cfg != nil {
			if out == nil {
				out = map[string]*anypb.Any{}
			}
			out[f.name] = cfg
		}
	}
	return out
}

// routeFilterConfig is a route's typed_per_filter_config; nil: none.
func routeFilterConfig(r *dag.Route, vh *dag.VirtualHost, opts Options) map[string]*anypb.Any {
	var out map[string]*anypb.Any
	for _, f := range httpFilters {
		if f.route == nil {
			continue
		}
		if cfg := f.route(r, vh, opts); cfg != nil {
			if out == nil {
				out = map[string]*anypb.Any{}
			}
			out[f.name] = cfg
		}
	}
	return out
}
