// Package rbac is Envoy's RBAC HTTP filter (envoy.filters.http.rbac) in the subset
// Portico's translator emits: per-route rules (RBACPerRoute) of policies that
// match any request from address blocks, by the connection's peer
// (direct_remote_ip) or the client's address (remote_ip), to allow only those
// (ALLOW) or refuse them (DENY). Anything else is refused when the configuration
// arrives, naming the field, so that no rule is ever silently weaker than asked.
package rbac

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// deniedBody is Envoy's body for a refused request.
const deniedBody = "RBAC: access denied"

// Factory makes the filter.
type Factory struct{}

// Name is the filter's Envoy name.
func (Factory) Name() string { return "envoy.filters.http.rbac" }

// ConfigType is the connection manager's configuration of the filter.
func (Factory) ConfigType() proto.Message { return &rbacv3.RBAC{} }

// PerRouteType is a route's or virtual host's.
func (Factory) PerRouteType() proto.Message { return &rbacv3.RBACPerRoute{} }

// New converts the connection manager's configuration: rules there apply to
// the routes that have none of their own.
func (Factory) New(a *anypb.Any) (filter.Filter, error) {
	var cfg rbacv3.RBAC
	if err := a.UnmarshalTo(&cfg); err != nil {
		return nil, err
	}
	rules, err := compile(&cfg)
	if err != nil {
		return nil, err
	}
	return &Filter{rules: rules}, nil
}

// ParsePerRoute converts an RBACPerRoute; one without rbac turns the filter off
// for the route.
func (Factory) ParsePerRoute(a *anypb.Any) (any, error) {
	var pr rbacv3.RBACPerRoute
	if err := a.UnmarshalTo(&pr); err != nil {
		return nil, err
	}
	if pr.GetRbac() == nil {
		return off{}, nil
	}
	rules, err := compile(pr.GetRbac())
	if err != nil {
		return nil, fmt.Errorf("rbac: %w", err)
	}
	if rules == nil {
		return off{}, nil
	}
	return rules, nil
}

// off is a per-route configuration that disables the filter.
type off struct{}

// DisablesFilter tells the chain to skip the filter on the route.
func (off) DisablesFilter() bool { return true }

// Rules are a compiled RBAC rule set.
type Rules struct {
	allow    bool
	policies []policy
}

type policy struct {
	name string
	// peers and clients are the blocks matched against the connection's peer
	// and against the client's address; any match is a match of the policy.
	peers, clients []netip.Prefix
}

// compile converts an RBAC filter configuration; nil rules enforce nothing.
func compile(cfg *rbacv3.RBAC) (*Rules, error) {
	switch {
	case cfg.GetShadowRules() != nil:
		return nil, fmt.Errorf("shadow_rules is not supported")
	case cfg.GetMatcher() != nil:
		return nil, fmt.Errorf("matcher is not supported")
	case cfg.GetShadowMatcher() != nil:
		return nil, fmt.Errorf("shadow_matcher is not supported")
	}
	r := cfg.GetRules()
	if r == nil {
		return nil, nil
	}
	if r.GetAuditLoggingOptions() != nil {
		return nil, fmt.Errorf("rules.audit_logging_options is not supported")
	}
	out := &Rules{}
	switch r.GetAction() {
	case rbacconfigv3.RBAC_ALLOW:
		out.allow = true
	case rbacconfigv3.RBAC_DENY:
	default:
		return nil, fmt.Errorf("rules.action %s is not supported (only ALLOW and DENY)", r.GetAction())
	}
	names := make([]string, 0, len(r.GetPolicies()))
	for name := range r.GetPolicies() {
		names = append(names, name)
	}
	slices.Sort(names) // Envoy reports the first matching policy by name
	for _, name := range names {
		p, err := compilePolicy(name, r.GetPolicies()[name])
		if err != nil {
			return nil, err
		}
		out.policies = append(out.policies, p)
	}
	return out, nil
}

func compilePolicy(name string, p *rbacconfigv3.Policy) (policy, error) {
	at := fmt.Sprintf("rules.policies[%q]", name)
	if p.GetCondition() != nil || p.GetCheckedCondition() != nil || p.GetCelConfig() != nil {
		return policy{}, fmt.Errorf("%s: conditions are not supported", at)
	}
	if len(p.GetPermissions()) != 1 || !p.GetPermissions()[0].GetAny() {
		return policy{}, fmt.Errorf("%s.permissions: only [{any: true}] is supported", at)
	}
	out := policy{name: name}
	for i, pr := range p.GetPrincipals() {
		if err := out.addPrincipal(pr, fmt.Sprintf("%s.principals[%d]", at, i), true); err != nil {
			return policy{}, err
		}
	}
	return out, nil
}

// addPrincipal adds the blocks of a principal: an address, or (top) a set of
// addresses any of which matches.
func (p *policy) addPrincipal(pr *rbacconfigv3.Principal, at string, top bool) error {
	switch id := pr.GetIdentifier().(type) {
	case *rbacconfigv3.Principal_DirectRemoteIp:
		b, err := prefix(id.DirectRemoteIp.GetAddressPrefix(), id.DirectRemoteIp.GetPrefixLen().GetValue())
		if err != nil {
			return fmt.Errorf("%s.direct_remote_ip: %w", at, err)
		}
		p.peers = append(p.peers, b)
	case *rbacconfigv3.Principal_RemoteIp:
		b, err := prefix(id.RemoteIp.GetAddressPrefix(), id.RemoteIp.GetPrefixLen().GetValue())
		if err != nil {
			return fmt.Errorf("%s.remote_ip: %w", at, err)
		}
		p.clients = append(p.clients, b)
	case *rbacconfigv3.Principal_OrIds:
		if !top {
			return fmt.Errorf("%s.or_ids: nested sets are not supported", at)
		}
		for i, sub := range id.OrIds.GetIds() {
			if err := p.addPrincipal(sub, fmt.Sprintf("%s.or_ids.ids[%d]", at, i), false); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%s: only direct_remote_ip, remote_ip and or_ids of them are supported", at)
	}
	return nil
}

// prefix is a CidrRange as Envoy reads it: bits past the length are ignored.
func prefix(addr string, bits uint32) (netip.Prefix, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("address_prefix %q: %w", addr, err)
	}
	a = a.Unmap()
	if int(bits) > a.BitLen() {
		return netip.Prefix{}, fmt.Errorf("prefix_len %d is longer than the address", bits)
	}
	return netip.PrefixFrom(a, int(bits)).Masked(), nil
}

// matches reports whether a request from peer for client matches p.
func (p *policy) matches(peer, client netip.Addr) bool {
	for _, b := range p.peers {
		if b.Contains(peer) {
			return true
		}
	}
	for _, b := range p.clients {
		if b.Contains(client) {
			return true
		}
	}
	return false
}

// Decide reports whether a request from peer for client may pass, and the
// policy that matched ("" for none).
func (r *Rules) Decide(peer, client netip.Addr) (ok bool, matched string) {
	for i := range r.policies {
		if r.policies[i].matches(peer, client) {
			return r.allow, r.policies[i].name
		}
	}
	return !r.allow, ""
}

// Filter enforces the rules of a route, or else the connection manager's.
type Filter struct {
	rules *Rules // the connection manager's; nil: none
}

// RouteScoped: without rules of the connection manager, the filter does
// nothing on a route without its own.
func (f *Filter) RouteScoped() bool { return f.rules == nil }

// DecodeHeaders refuses the request with 403 when the rules say so.
func (f *Filter) DecodeHeaders(s *filter.Stream, perRoute any) *filter.LocalReply {
	rules := f.rules
	if r, ok := perRoute.(*Rules); ok {
		rules = r
	}
	if rules == nil {
		return nil
	}
	ok, matched := rules.Decide(s.Request.Peer.Addr().Unmap(), s.Request.Client.Unmap())
	if ok {
		return nil
	}
	if matched == "" {
		matched = "none"
	}
	return &filter.LocalReply{
		Status:  http.StatusForbidden,
		Body:    deniedBody,
		Details: "rbac_access_denied_matched_policy[" + matched + "]",
	}
}
