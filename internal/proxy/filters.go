package proxy

import (
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/filters/compressor"
	"github.com/portico-dev/portico/internal/proxy/filters/cors"
	"github.com/portico-dev/portico/internal/proxy/filters/extauthz"
	"github.com/portico-dev/portico/internal/proxy/filters/grpcweb"
	"github.com/portico-dev/portico/internal/proxy/filters/jwtauthn"
	"github.com/portico-dev/portico/internal/proxy/filters/localratelimit"
	"github.com/portico-dev/portico/internal/proxy/filters/lua"
	"github.com/portico-dev/portico/internal/proxy/filters/ratelimit"
	"github.com/portico-dev/portico/internal/proxy/filters/rbac"
)

// httpFilters are the HTTP filters the proxy implements, each in a package
// of its own under internal/proxy/filters. Adding one is one line here. The
// router, last in every chain, is the proxy's own request forwarding.
var httpFilters = filter.NewRegistry(&routerv3.Router{},
	localratelimit.Factory{},
	ratelimit.Factory{},
	lua.Factory{},
	extauthz.Factory{},
	cors.Factory{},
	rbac.Factory{},
	jwtauthn.Factory{},
	grpcweb.Factory{},
	compressor.Factory{},
)
