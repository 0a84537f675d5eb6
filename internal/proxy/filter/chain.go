package filter

import (
	"errors"
	"fmt"
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Registry knows every filter the proxy implements, by the type of its
// configuration. It is built once and never changes.
type Registry struct {
	byConfig   map[string]Factory         // typed_config type URL
	byPerRoute map[string]PerRouteFactory // typed_per_filter_config type URL
	terminal   string                     // the router's type URL
}

// NewRegistry registers factories; terminal is the router's configuration
// type, which must end every chain and is run by the proxy itself.
func NewRegistry(terminal proto.Message, factories ...Factory) *Registry {
	r := &Registry{
		byConfig:   map[string]Factory{},
		byPerRoute: map[string]PerRouteFactory{},
		terminal:   typeURL(terminal),
	}
	for _, f := range factories {
		r.byConfig[typeURL(f.ConfigType())] = f
		if pf, ok := f.(PerRouteFactory); ok {
			r.byPerRoute[typeURL(pf.PerRouteType())] = pf
		}
	}
	return r
}

func typeURL(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}

// Chain is a connection manager's filters, in order, without the router.
// A nil *Chain has no filters.
type Chain struct {
	entries []entry
	// bodyEncoders: some filter is a BodyEncoder.
	bodyEncoders bool
}

type entry struct {
	name   string // the HttpFilter's name, which typed_per_filter_config keys use
	filter Filter
	// disabled filters run only on routes whose per-route configuration
	// enables them (HttpFilter.disabled).
	disabled bool
	// routeScoped filters run only on routes with per-route configuration.
	routeScoped bool
	// selective, when set, picks the requests the filter runs on.
	selective Selective
}

// Clusters are the clusters the chain's filters reach (ClusterUser), each
// once, in the filters' order.
func (c *Chain) Clusters() []string {
	if c == nil {
		return nil
	}
	var out []string
	for i := range c.entries {
		if cu, ok := c.entries[i].filter.(ClusterUser); ok {
			for _, name := range cu.Clusters() {
				if !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// BuildChain converts a connection manager's http_filters. The router must
// come last, once; a filter the proxy does not implement is an error unless
// it is optional (is_optional), as in Envoy. With only the router, the
// chain is nil: requests pay nothing for it.
func (r *Registry) BuildChain(filters []*hcmv3.HttpFilter) (*Chain, error) {
	if len(filters) == 0 {
		return nil, errors.New("http_filters: the router (envoy.filters.http.router) is missing")
	}
	var c Chain
	for i, hf := range filters {
		tc := hf.GetTypedConfig()
		if tc == nil {
			return nil, fmt.Errorf("http filter %q: only typed_config is supported", hf.GetName())
		}
		last := i == len(filters)-1
		if tc.GetTypeUrl() == r.terminal {
			if !last {
				return nil, fmt.Errorf("http filter %q: the router must be the last filter", hf.GetName())
			}
			if hf.GetDisabled() {
				return nil, errors.New("the router filter cannot be disabled")
			}
			continue
		}
		if last {
			return nil, fmt.Errorf("http filter %q: the last filter must be the router (envoy.filters.http.router)", hf.GetName())
		}
		f, ok := r.byConfig[tc.GetTypeUrl()]
		if !ok {
			if hf.GetIsOptional() {
				continue
			}
			return nil, fmt.Errorf("http filter %q (%s) is not supported", hf.GetName(), tc.GetTypeUrl())
		}
		flt, err := f.New(tc)
		if err != nil {
			return nil, fmt.Errorf("http filter %q: %w", hf.GetName(), err)
		}
		rs, _ := flt.(RouteScoped)
		sel, _ := flt.(Selective)
		if _, ok := flt.(BodyEncoder); ok {
			c.bodyEncoders = true
		}
		c.entries = append(c.entries, entry{name: hf.GetName(), filter: flt, disabled: hf.GetDisabled(), routeScoped: rs != nil && rs.RouteScoped(), selective: sel})
	}
	if len(c.entries) == 0 {
		return nil, nil
	}
	return &c, nil
}

// PerRoute is one filter's configuration on a route or virtual host.
type PerRoute struct {
	Config any
	// Disabled turns the filter off for the route (FilterConfig.disabled, or
	// a filter's own "disabled" field when the factory reports it so).
	Disabled bool
	// Enabled turns on a filter the connection manager disables by default
	// (a FilterConfig without disabled).
	Enabled bool
}

// PerFilter is the typed_per_filter_config of a route or virtual host,
// converted, by filter name. A nil PerFilter configures nothing.
type PerFilter map[string]PerRoute

// ParsePerFilter converts a typed_per_filter_config. Unknown types are an
// error unless wrapped in an optional FilterConfig.
func (r *Registry) ParsePerFilter(m map[string]*anypb.Any) (PerFilter, error) {
	return r.ParsePerFilterAt(m, Place{})
}

// Place is where a per-route configuration is configured: a virtual host's
// (Route empty) or one route's.
type Place struct {
	VirtualHost, Route string
}

// Placed is implemented by per-route configurations that need to know their
// Place, e.g. to find state they keep across configuration swaps (a rate
// limit's bucket); ParsePerFilterAt tells them once parsed.
type Placed interface {
	SetPlace(filter string, at Place)
}

// ParsePerFilterAt is ParsePerFilter for the configuration at a place.
func (r *Registry) ParsePerFilterAt(m map[string]*anypb.Any, at Place) (PerFilter, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(PerFilter, len(m))
	for name, a := range m {
		pr, err := r.parsePerRoute(a)
		if err != nil {
			return nil, fmt.Errorf("typed_per_filter_config %q: %w", name, err)
		}
		if pr == nil {
			continue
		}
		if p, ok := pr.Config.(Placed); ok {
			p.SetPlace(name, at)
		}
		out[name] = *pr
	}
	return out, nil
}

func (r *Registry) parsePerRoute(a *anypb.Any) (*PerRoute, error) {
	if a.MessageIs(&routev3.FilterConfig{}) {
		var fc routev3.FilterConfig
		if err := a.UnmarshalTo(&fc); err != nil {
			return nil, err
		}
		if fc.GetDisabled() {
			return &PerRoute{Disabled: true}, nil
		}
		if fc.GetConfig() == nil {
			return &PerRoute{Enabled: true}, nil
		}
		inner, err := r.parsePerRoute(fc.GetConfig())
		if err != nil {
			if fc.GetIsOptional() {
				return nil, nil
			}
			return nil, err
		}
		inner.Enabled = true
		return inner, nil
	}
	f, ok := r.byPerRoute[a.GetTypeUrl()]
	if !ok {
		return nil, fmt.Errorf("%s is not supported", a.GetTypeUrl())
	}
	cfg, err := f.ParsePerRoute(a)
	if err != nil {
		return nil, err
	}
	if d, ok := cfg.(interface{ DisablesFilter() bool }); ok && d.DisablesFilter() {
		return &PerRoute{Disabled: true}, nil
	}
	return &PerRoute{Config: cfg}, nil
}

// Merge is route's configuration over vhost's: the most specific wins, per
// filter, as Envoy resolves typed_per_filter_config.
func Merge(route, vhost PerFilter) PerFilter {
	if len(vhost) == 0 {
		return route
	}
	if len(route) == 0 {
		return vhost
	}
	out := make(PerFilter, len(route)+len(vhost))
	for k, v := range vhost {
		out[k] = v
	}
	for k, v := range route {
		out[k] = v
	}
	return out
}

// skips reports whether e does not run for a request with headers h (nil:
// whatever its headers) on a route configured by perFilter.
func (e *entry) skips(perFilter PerFilter, h Headers) (PerRoute, bool) {
	pr, ok := perFilter[e.name]
	return pr, pr.Disabled || ((e.disabled || e.routeScoped) && !ok) || (e.disabled && !pr.Enabled) ||
		(e.selective != nil && h != nil && !e.selective.Selects(h))
}

// Idle reports whether no filter of the chain runs on a route configured by
// perFilter, whatever the request: its requests can skip the chain.
func (c *Chain) Idle(perFilter PerFilter) bool {
	return c.IdleFor(perFilter, nil)
}

// IdleFor reports whether no filter of the chain runs for a request with
// headers h on a route configured by perFilter: the request can skip the chain.
func (c *Chain) IdleFor(perFilter PerFilter, h Headers) bool {
	if c == nil {
		return true
	}
	for i := range c.entries {
		if _, skip := c.entries[i].skips(perFilter, h); !skip {
			return false
		}
	}
	return true
}

// Encoding reports whether some filter of the chain encodes responses on a route
// configured by perFilter.
func (c *Chain) Encoding(perFilter PerFilter) bool {
	if c == nil {
		return false
	}
	for i := range c.entries {
		e := &c.entries[i]
		if _, ok := e.filter.(Encoder); !ok {
			continue
		}
		if _, skip := e.skips(perFilter, nil); !skip {
			return true
		}
	}
	return false
}

// Encode runs the encoders on an upstream response's headers, in reverse order.
func (c *Chain) Encode(s *Stream, perFilter PerFilter, h Headers) {
	if c == nil {
		return
	}
	for i := len(c.entries) - 1; i >= 0; i-- {
		e := &c.entries[i]
		enc, ok := e.filter.(Encoder)
		if !ok {
			continue
		}
		if pr, skip := e.skips(perFilter, nil); !skip {
			enc.EncodeHeaders(s, pr.Config, h)
		}
	}
}

// Decode runs the chain's filters in order until one answers. perFilter is
// the matched route's (nil without a route).
func (c *Chain) Decode(s *Stream, perFilter PerFilter) *LocalReply {
	if c == nil {
		return nil
	}
	for i := range c.entries {
		e := &c.entries[i]
		pr, skip := e.skips(perFilter, s.Request.Headers)
		if skip {
			continue
		}
		if lr := e.filter.DecodeHeaders(s, pr.Config); lr != nil {
			lr.Filter = e.name
			if lr.Details == "" {
				lr.Details = e.name
			}
			return lr
		}
	}
	return nil
}
