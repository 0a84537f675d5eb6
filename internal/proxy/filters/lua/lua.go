// Package lua is Envoy's Lua filter (envoy.filters.http.lua) as far as Portico's
// translator uses it: the one cookie rewrite script of internal/xds/cookierewrite,
// whose rules come per route (or per weighted cluster) in filter_context. Any other
// Lua code is refused (a NACK naming it): the embedded proxy runs no Lua, it does what
// that script does.
package lua

import (
	"errors"
	"fmt"

	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/xds/cookierewrite"
)

// Factory makes the filter.
type Factory struct{}

var _ filter.PerRouteFactory = Factory{}

func (Factory) Name() string                { return "envoy.filters.http.lua" }
func (Factory) ConfigType() proto.Message   { return &luav3.Lua{} }
func (Factory) PerRouteType() proto.Message { return &luav3.LuaPerRoute{} }

// New accepts a listener-level configuration without code of its own: the code
// comes per route.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	var cfg luav3.Lua
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, err
	}
	switch {
	case cfg.GetInlineCode() != "":
		return nil, errors.New("inline_code is not supported (only the cookie rewrite script, per route)")
	case cfg.GetDefaultSourceCode() != nil:
		return nil, errors.New("default_source_code is not supported (only the cookie rewrite script, per route)")
	case len(cfg.GetSourceCodes()) > 0:
		return nil, errors.New("source_codes are not supported (only the cookie rewrite script, per route)")
	case len(cfg.GetPackagePaths()) > 0 || len(cfg.GetPackageCpaths()) > 0:
		return nil, errors.New("package_paths are not supported")
	}
	return cookieFilter{}, nil
}

// perRoute are the cookie rules of a route or weighted cluster.
type perRoute struct {
	rules    []cookierewrite.Rule
	disabled bool
}

func (p *perRoute) DisablesFilter() bool { return p.disabled }

// ParsePerRoute accepts the cookie rewrite script with its rules, or disabled.
func (Factory) ParsePerRoute(a *anypb.Any) (any, error) {
	var pr luav3.LuaPerRoute
	if err := a.UnmarshalTo(&pr); err != nil {
		return nil, err
	}
	if pr.GetDisabled() {
		return &perRoute{disabled: true}, nil
	}
	if pr.GetName() != "" {
		return nil, fmt.Errorf("name %q is not supported (only the cookie rewrite script as source_code)", pr.GetName())
	}
	if code := pr.GetSourceCode().GetInlineString(); code != cookierewrite.Script {
		return nil, errors.New("source_code: only Portico's cookie rewrite script is supported (inline_string, as the translator writes it)")
	}
	if len(pr.GetPackagePaths()) > 0 || len(pr.GetPackageCpaths()) > 0 || pr.GetSharedVmId() != "" {
		return nil, errors.New("package_paths and shared_vm_id are not supported")
	}
	rules, err := cookierewrite.FromContext(pr.GetFilterContext())
	if err != nil {
		return nil, err
	}
	return &perRoute{rules: rules}, nil
}

// cookieFilter rewrites the Set-Cookie headers of upstream responses.
type cookieFilter struct{}

func (cookieFilter) RouteScoped() bool { return true }

func (cookieFilter) DecodeHeaders(*filter.Stream, any) *filter.LocalReply { return nil }

func (cookieFilter) EncodeHeaders(_ *filter.Stream, cfg any, h filter.Headers) {
	pr, ok := cfg.(*perRoute)
	if !ok || len(pr.rules) == 0 {
		return
	}
	cookies := h.Values("Set-Cookie")
	if len(cookies) == 0 {
		return
	}
	out := make([]string, len(cookies))
	for i, c := range cookies {
		out[i] = cookierewrite.Rewrite(c, pr.rules)
	}
	h.Del("Set-Cookie")
	for _, c := range out {
		h.Add("Set-Cookie", c)
	}
}
