package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/xds/cookierewrite"
)

// luaFilter is Envoy's Lua filter, which rewrites cookies (cookieRewritePolicies) on
// the routes and weighted clusters that say how: it has no code of its own, so a route
// without rules pays only for the filter's presence.
var luaFilter = httpFilter{
	name:     "envoy.filters.http.lua",
	listener: func(*dag.SecureVirtualHost, Options) *anypb.Any { return mustAny(&luav3.Lua{}) },
	route: func(r *dag.Route, _ *dag.VirtualHost, _ Options) *anypb.Any {
		return cookieRewriteConfig(r.CookieRewrites)
	},
}

// cookieRewriteConfig is the Lua filter's per-route configuration for rules: Portico's
// one cookie script, the rules in its filter_context; nil without rules.
func cookieRewriteConfig(rules []dag.CookieRewrite) *anypb.Any {
	if len(rules) == 0 {
		return nil
	}
	crs := make([]cookierewrite.Rule, len(rules))
	for i, r := range rules {
		crs[i] = cookierewrite.Rule{Name: r.Name, Path: r.Path, Domain: r.Domain, Secure: r.Secure, SameSite: r.SameSite}
	}
	ctx, err := cookierewrite.Context(crs)
	if err != nil {
		panic(err) // strings and booleans only: cannot fail
	}
	return mustAny(&luav3.LuaPerRoute{
		Override:      &luav3.LuaPerRoute_SourceCode{SourceCode: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: cookierewrite.Script}}},
		FilterContext: ctx,
	})
}

// clusterCookieRewrites are the rules for the answers of one weighted cluster: its
// own, then the route's for the cookies it does not name (the most specific
// typed_per_filter_config replaces the route's whole).
func clusterCookieRewrites(wc *dag.WeightedCluster, r *dag.Route) []dag.CookieRewrite {
	if len(wc.CookieRewrites) == 0 {
		return nil
	}
	out := append([]dag.CookieRewrite(nil), wc.CookieRewrites...)
	for _, rr := range r.CookieRewrites {
		named := false
		for _, o := range wc.CookieRewrites {
			named = named || o.Name == rr.Name
		}
		if !named {
			out = append(out, rr)
		}
	}
	return out
}
