package dag

import (
	"fmt"
	"net/netip"
	"strings"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// problemIPFilter is the status type of a bad ipAllowPolicy or ipDenyPolicy.
const problemIPFilter = "IPFilterError"

// IPFilter decides who may send requests to a virtual host or route by address.
// A route's filter replaces its virtual host's.
type IPFilter struct {
	// Allow lets only the addresses Rules match through; otherwise the addresses
	// Rules match are refused and everyone else passes. Either way the refused get 403.
	Allow bool
	Rules []IPRule
}

// IPRule matches one block of addresses.
type IPRule struct {
	// Remote matches the client's address (X-Forwarded-For after the trusted hops)
	// instead of the connection's peer.
	Remote bool
	Prefix netip.Prefix
}

// ParseCIDR reads an address block as HTTPProxy's ipAllowPolicy and ipDenyPolicy
// take it: a CIDR ("10.0.0.0/8", "2001:db8::/32") or a bare address, which is a /32
// or a /128. Bits past the prefix length are dropped ("10.1.2.3/8" is 10.0.0.0/8).
// An IPv4-mapped IPv6 address stands for its IPv4 address.
func ParseCIDR(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q has a zone, which an address block cannot have", s)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q has a zone, which an address block cannot have", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// proxyIPFilter checks and translates a virtual host's or route's ipAllowPolicy and
// ipDenyPolicy (field is where they are); nil when neither is set or they are invalid.
func proxyIPFilter(allow, deny []contourv1.IPFilterPolicy, field string, c *proxyCheck) *IPFilter {
	if len(allow) > 0 && len(deny) > 0 {
		c.fail(problemIPFilter, "PolicyConflict", "%s: ipAllowPolicy and ipDenyPolicy are exclusive: list the addresses to let in (ipAllowPolicy) or those to keep out (ipDenyPolicy), not both", field)
		return nil
	}
	f := &IPFilter{Allow: len(allow) > 0}
	rules, name := deny, "ipDenyPolicy"
	if f.Allow {
		rules, name = allow, "ipAllowPolicy"
	}
	if len(rules) == 0 {
		return nil
	}
	ok := true
	for i, r := range rules {
		at := fmt.Sprintf("%s.%s[%d]", field, name, i)
		var remote bool
		switch r.Source {
		case contourv1.IPFilterSourcePeer:
		case contourv1.IPFilterSourceRemote:
			remote = true
		default:
			ok = false
			c.fail(problemIPFilter, "SourceInvalid", "%s.source %q must be Peer (the connection's address) or Remote (the client's address from X-Forwarded-For)", at, r.Source)
		}
		p, err := ParseCIDR(r.CIDR)
		if err != nil {
			ok = false
			c.fail(problemIPFilter, "CIDRInvalid", "%s.cidr %q is not an IP address or CIDR block: write one such as 10.0.0.0/8, 192.168.1.7 or 2001:db8::/32", at, r.CIDR)
			continue
		}
		f.Rules = append(f.Rules, IPRule{Remote: remote, Prefix: p})
	}
	if !ok {
		return nil
	}
	return f
}
