package rbac

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacconfigv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

func pack(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func cidr(p string, n uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: p, PrefixLen: wrapperspb.UInt32(n)}
}

func perRoute(action rbacconfigv3.RBAC_Action, ids ...*rbacconfigv3.Principal) *rbacv3.RBACPerRoute {
	return &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{Action: action, Policies: map[string]*rbacconfigv3.Policy{"ip-rules": {
		Permissions: []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_Any{Any: true}}},
		Principals:  []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_OrIds{OrIds: &rbacconfigv3.Principal_Set{Ids: ids}}}},
	}}}}}
}

func peer(p *corev3.CidrRange) *rbacconfigv3.Principal {
	return &rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_DirectRemoteIp{DirectRemoteIp: p}}
}

func remote(p *corev3.CidrRange) *rbacconfigv3.Principal {
	return &rbacconfigv3.Principal{Identifier: &rbacconfigv3.Principal_RemoteIp{RemoteIp: p}}
}

// decide runs the filter on a request from peerAddr for client.
func decide(t *testing.T, cfg any, peerAddr, client string) *filter.LocalReply {
	t.Helper()
	f, err := Factory{}.New(pack(t, &rbacv3.RBAC{}))
	if err != nil {
		t.Fatal(err)
	}
	s := filter.NewStream(context.Background(), &filter.Env{})
	s.Request.Peer = netip.AddrPortFrom(netip.MustParseAddr(peerAddr), 40000)
	s.Request.Client = netip.MustParseAddr(client)
	return f.DecodeHeaders(s, cfg)
}

func TestAllowAndDeny(t *testing.T) {
	allow, err := Factory{}.ParsePerRoute(pack(t, perRoute(rbacconfigv3.RBAC_ALLOW, peer(cidr("10.0.0.0", 8)), remote(cidr("2001:db8::", 32)))))
	if err != nil {
		t.Fatal(err)
	}
	deny, err := Factory{}.ParsePerRoute(pack(t, perRoute(rbacconfigv3.RBAC_DENY, remote(cidr("192.168.1.7", 32)))))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		cfg          any
		peer, client string
		refused      bool
		details      string
	}{
		{"allowed peer", allow, "10.1.2.3", "203.0.113.9", false, ""},
		{"allowed client over IPv6", allow, "127.0.0.1", "2001:db8::5", false, ""},
		{"neither", allow, "127.0.0.1", "203.0.113.9", true, "rbac_access_denied_matched_policy[none]"},
		{"peer is not client", allow, "127.0.0.1", "10.0.0.1", true, "rbac_access_denied_matched_policy[none]"},
		{"denied client", deny, "127.0.0.1", "192.168.1.7", true, "rbac_access_denied_matched_policy[ip-rules]"},
		{"denied address as peer only", deny, "192.168.1.7", "127.0.0.1", false, ""},
		{"other client", deny, "127.0.0.1", "192.168.1.8", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lr := decide(t, tc.cfg, tc.peer, tc.client)
			if (lr != nil) != tc.refused {
				t.Fatalf("refused = %v, want %v", lr != nil, tc.refused)
			}
			if lr != nil && (lr.Status != 403 || lr.Body != "RBAC: access denied" || lr.Details != tc.details) {
				t.Errorf("reply %+v, want 403 %q with details %q", lr, "RBAC: access denied", tc.details)
			}
		})
	}
}

// An IPv4-mapped IPv6 peer is its IPv4 address, and bits past a CIDR's length are
// ignored, as in Envoy.
func TestAddressForms(t *testing.T) {
	cfg, err := Factory{}.ParsePerRoute(pack(t, perRoute(rbacconfigv3.RBAC_ALLOW, peer(cidr("10.9.9.9", 8)))))
	if err != nil {
		t.Fatal(err)
	}
	if lr := decide(t, cfg, "10.200.0.1", "10.200.0.1"); lr != nil {
		t.Errorf("10.200.0.1 refused by 10.9.9.9/8: %+v", lr)
	}
	f, _ := Factory{}.New(pack(t, &rbacv3.RBAC{}))
	s := filter.NewStream(context.Background(), &filter.Env{})
	s.Request.Peer = netip.MustParseAddrPort("[::ffff:10.0.0.1]:1")
	s.Request.Client = s.Request.Peer.Addr()
	if lr := f.DecodeHeaders(s, cfg); lr != nil {
		t.Errorf("::ffff:10.0.0.1 refused by 10.9.9.9/8: %+v", lr)
	}
}

// The listener-level rules apply without per-route rules; an RBACPerRoute without
// rbac turns the filter off on its route.
func TestListenerRulesAndDisable(t *testing.T) {
	f, err := Factory{}.New(pack(t, perRoute(rbacconfigv3.RBAC_DENY, peer(cidr("127.0.0.0", 8))).GetRbac()))
	if err != nil {
		t.Fatal(err)
	}
	if rs, ok := f.(filter.RouteScoped); !ok || rs.RouteScoped() {
		t.Errorf("a filter with listener rules must run on every route")
	}
	s := filter.NewStream(context.Background(), &filter.Env{})
	s.Request.Peer = netip.MustParseAddrPort("127.0.0.1:1")
	s.Request.Client = s.Request.Peer.Addr()
	if lr := f.DecodeHeaders(s, nil); lr == nil || lr.Status != 403 {
		t.Errorf("listener rules not enforced: %+v", lr)
	}
	off, err := Factory{}.ParsePerRoute(pack(t, &rbacv3.RBACPerRoute{}))
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := off.(interface{ DisablesFilter() bool }); !ok || !d.DisablesFilter() {
		t.Errorf("RBACPerRoute without rbac = %#v, want the filter disabled", off)
	}
}

// What the filter does not implement is refused, naming the field.
func TestUnsupportedIsRefused(t *testing.T) {
	withPolicy := func(p *rbacconfigv3.Policy) *rbacv3.RBACPerRoute {
		return &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{Policies: map[string]*rbacconfigv3.Policy{"p": p}}}}
	}
	anyPerm := []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_Any{Any: true}}}
	for _, tc := range []struct {
		name string
		cfg  *rbacv3.RBACPerRoute
		want string
	}{
		{"shadow rules", &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{ShadowRules: &rbacconfigv3.RBAC{}}}, "shadow_rules"},
		{"log action", &rbacv3.RBACPerRoute{Rbac: &rbacv3.RBAC{Rules: &rbacconfigv3.RBAC{Action: rbacconfigv3.RBAC_LOG}}}, "rules.action LOG"},
		{"header permission", withPolicy(&rbacconfigv3.Policy{Permissions: []*rbacconfigv3.Permission{{Rule: &rbacconfigv3.Permission_UrlPath{}}}}), `rules.policies["p"].permissions`},
		{"header principal", withPolicy(&rbacconfigv3.Policy{Permissions: anyPerm, Principals: []*rbacconfigv3.Principal{{Identifier: &rbacconfigv3.Principal_Any{Any: true}}}}), `rules.policies["p"].principals[0]`},
		{"bad address", withPolicy(&rbacconfigv3.Policy{Permissions: anyPerm, Principals: []*rbacconfigv3.Principal{peer(cidr("10.0.0", 8))}}), `principals[0].direct_remote_ip: address_prefix "10.0.0"`},
		{"long prefix", withPolicy(&rbacconfigv3.Policy{Permissions: anyPerm, Principals: []*rbacconfigv3.Principal{remote(cidr("10.0.0.0", 33))}}), "prefix_len 33"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Factory{}.ParsePerRoute(pack(t, tc.cfg))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// BenchmarkDecodeHeaders is the filter's cost per request on a route with two
// blocks, the client in the second.
func BenchmarkDecodeHeaders(b *testing.B) {
	a, _ := anypb.New(perRoute(rbacconfigv3.RBAC_ALLOW, peer(cidr("10.0.0.0", 8)), peer(cidr("127.0.0.0", 8))))
	cfg, err := Factory{}.ParsePerRoute(a)
	if err != nil {
		b.Fatal(err)
	}
	f := &Filter{}
	s := filter.NewStream(context.Background(), &filter.Env{})
	s.Request.Peer = netip.MustParseAddrPort("127.0.0.1:40000")
	s.Request.Client = s.Request.Peer.Addr()
	b.ReportAllocs()
	for b.Loop() {
		if f.DecodeHeaders(s, cfg) != nil {
			b.Fatal("refused")
		}
	}
}
