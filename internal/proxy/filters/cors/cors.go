// Package cors is Envoy's CORS HTTP filter (envoy.filters.http.cors): with a
// route's or virtual host's CorsPolicy, a preflight (OPTIONS with an Origin and
// an Access-Control-Request-Method) from an allowed origin is answered by the
// proxy, and the responses to other requests from an allowed origin carry the
// CORS headers. Requests from other origins pass untouched: the browser then
// refuses what they get.
//
// Envoy merges a route's policy with its virtual host's field by field; here the
// most specific policy is used whole, which is the same for what Portico's
// translator emits (a policy per virtual host or per route, never both).
package cors

import (
	"fmt"
	"net/http"

	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// Factory makes the filter.
type Factory struct{}

// Name is the filter's Envoy name.
func (Factory) Name() string { return "envoy.filters.http.cors" }

// ConfigType is the connection manager's configuration of the filter (empty).
func (Factory) ConfigType() proto.Message { return &corsv3.Cors{} }

// PerRouteType is a route's or virtual host's policy.
func (Factory) PerRouteType() proto.Message { return &corsv3.CorsPolicy{} }

// New converts the connection manager's configuration, which has no fields.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	var cfg corsv3.Cors
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, err
	}
	return Filter{}, nil
}

// ParsePerRoute converts a CorsPolicy.
func (Factory) ParsePerRoute(a *anypb.Any) (any, error) {
	var p corsv3.CorsPolicy
	if err := a.UnmarshalTo(&p); err != nil {
		return nil, err
	}
	return Compile(&p)
}

// Policy is a compiled CorsPolicy.
type Policy struct {
	origins       []xdsconv.StringMatcher
	anyOrigin     bool // a matcher matches "*": every origin is allowed
	allowMethods  string
	allowHeaders  string
	exposeHeaders string
	maxAge        string
	credentials   bool
	privateNet    bool
	// forwardRefused sends preflights from other origins upstream (Envoy's
	// default) instead of answering them without allowing them.
	forwardRefused bool
}

// Compile converts a CorsPolicy; its error names the field it cannot honour.
func Compile(p *corsv3.CorsPolicy) (*Policy, error) {
	if p.GetFilterEnabled() != nil {
		return nil, fmt.Errorf("filter_enabled is not supported")
	}
	if p.GetShadowEnabled() != nil {
		return nil, fmt.Errorf("shadow_enabled is not supported")
	}
	out := &Policy{
		allowMethods:   p.GetAllowMethods(),
		allowHeaders:   p.GetAllowHeaders(),
		exposeHeaders:  p.GetExposeHeaders(),
		maxAge:         p.GetMaxAge(),
		credentials:    p.GetAllowCredentials().GetValue(),
		privateNet:     p.GetAllowPrivateNetworkAccess().GetValue(),
		forwardRefused: p.GetForwardNotMatchingPreflights() == nil || p.GetForwardNotMatchingPreflights().GetValue(),
	}
	for i, sm := range p.GetAllowOriginStringMatch() {
		m, err := xdsconv.NewStringMatcher(sm)
		if err != nil {
			return nil, fmt.Errorf("allow_origin_string_match[%d]: %w", i, err)
		}
		out.origins = append(out.origins, m)
		out.anyOrigin = out.anyOrigin || m.Match("*")
	}
	return out, nil
}

// Allows reports whether requests from origin are allowed.
func (p *Policy) Allows(origin string) bool {
	if p.anyOrigin {
		return true
	}
	for i := range p.origins {
		if p.origins[i].Match(origin) {
			return true
		}
	}
	return false
}

// Filter applies a route's policy.
type Filter struct{}

// RouteScoped: without a policy the filter does nothing.
func (Filter) RouteScoped() bool { return true }

// DecodeHeaders answers preflights and marks the responses of allowed origins.
func (Filter) DecodeHeaders(s *filter.Stream, perRoute any) *filter.LocalReply {
	p, _ := perRoute.(*Policy)
	if p == nil {
		return nil
	}
	h := s.Request.Headers
	origin := h.Get("Origin")
	if origin == "" {
		return nil
	}
	allowed := p.Allows(origin)
	if allowed {
		// Every response the client gets carries them, the preflight's too.
		s.SetResponseHeader("Access-Control-Allow-Origin", origin)
		if p.credentials {
			s.SetResponseHeader("Access-Control-Allow-Credentials", "true")
		}
		if p.exposeHeaders != "" {
			s.SetResponseHeader("Access-Control-Expose-Headers", p.exposeHeaders)
		}
	}
	if s.Request.Method != http.MethodOptions {
		return nil
	}
	method := h.Get("Access-Control-Request-Method")
	if method == "" || (!allowed && p.forwardRefused) {
		return nil
	}
	return p.preflight(h, method)
}

// preflight is the answer to a preflight: 200 with what the policy allows.
func (p *Policy) preflight(h filter.Headers, method string) *filter.LocalReply {
	// Envoy's CORS filter encodes its answer itself: the route's response
	// header changes are not in it.
	lr := &filter.LocalReply{Status: http.StatusOK, Details: "cors_response", Bare: true}
	set := func(name, value string) {
		lr.Headers = append(lr.Headers, filter.HeaderValue{Name: name, Value: value, Overwrite: true})
	}
	if p.credentials {
		set("Access-Control-Allow-Credentials", "true")
	}
	switch p.allowMethods {
	case "":
	case "*":
		set("Access-Control-Allow-Methods", method)
	default:
		set("Access-Control-Allow-Methods", p.allowMethods)
	}
	switch p.allowHeaders {
	case "":
	case "*":
		if asked := h.Get("Access-Control-Request-Headers"); asked != "" {
			set("Access-Control-Allow-Headers", asked)
		}
	default:
		set("Access-Control-Allow-Headers", p.allowHeaders)
	}
	if p.maxAge != "" {
		set("Access-Control-Max-Age", p.maxAge)
	}
	if p.privateNet && h.Get("Access-Control-Request-Private-Network") == "true" {
		set("Access-Control-Allow-Private-Network", "true")
	}
	return lr
}
