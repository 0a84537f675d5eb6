package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// rbacFilterName is Envoy's RBAC filter, which enforces the IP allow and deny lists.
const rbacFilterName = "envoy.filters.http.rbac"

// ipFilterPolicyName names the one policy of an IP filter (in Envoy's response code
// details and stats).
const ipFilterPolicyName = "ip-rules"

// rbacFilter is in every connection manager without rules of its own: the rules
// are per virtual host and route.
var rbacFilter = httpFilter{
	name:     rbacFilterName,
	listener: func(*dag.SecureVirtualHost, Options) *anypb.Any { return mustAny(&rbacv3.RBAC{}) },
	vhost: func(vh *dag.VirtualHost, _ Options) *anypb.Any {
		return rbacPerRoute(vh.IPFilter)
	},
	route: func(r *dag.Route, _ *dag.VirtualHost, _ Options) *anypb.Any {
		return rbacPerRoute(r.IPFilter)
	},
}

// rbacPerRoute is an IP filter as RBAC: one policy whose principals are the
// address blocks, allowing (ALLOW) or refusing (DENY) who matches it.
func rbacPerRoute(f *dag.IPFilter) *anypb.Any {
	if f == nil {
		return nil
	}
	ids := make([]*rbacconfigv3.Principal, len(f.Rules))
	for i, r := range f.Rules {
		cidr := &corev3.CidrRange{AddressPrefix: r.Prefix.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(r.Prefix.Bits()))}
		if r.Remote {
			ids[i] = &rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_RemoteIp{RemoteIp: cidr}}
		} else {
			ids[i] = &rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_DirectRemoteIp{DirectRemoteIp: cidr}}
		}
	}
	action := rbacconfigv3.RBAC_DENY
	if f.Allow {
		action = rbacconfigv3.RBAC_ALLOW
	}
	return mustAny(&rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{
		Action: action,
		Policies: map[string]*rbacconfigv3.Policy{ipFilterPolicyName: {
			Permissions: []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_Any{Any: true}}},
			Principals:  []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_OrIds{OrIds: &rbacconfigv3.Principal_Set{Ids: ids}}}},
		}},
	}}})
}
