package router

import (
	"net/netip"
	"strings"
)

// ClientAddressing is how the connection manager decides the client's
// address (use_remote_address, xff_num_trusted_hops): the route's source IP
// hashing and %DOWNSTREAM_REMOTE_ADDRESS% read it as the edge does.
type ClientAddressing struct {
	UseRemoteAddress bool
	XFFTrustedHops   uint32 // xff_num_trusted_hops
}

// ForwardedClient is the client's address X-Forwarded-For gives, as Envoy reads
// it: at the edge (use_remote_address) the xff_num_trusted_hops-th address from
// the right, none without trusted hops; behind another proxy, the address after
// the trusted hops from the right. ok is false when the header has too few
// addresses or that one is not an IP address: the peer is the client then.
func (c *ClientAddressing) ForwardedClient(xff []string) (netip.Addr, bool) {
	skip := int(c.XFFTrustedHops)
	if c.UseRemoteAddress {
		if skip == 0 {
			return netip.Addr{}, false
		}
		skip--
	}
	for i := len(xff) - 1; i >= 0; i-- {
		list := xff[i]
		for list != "" {
			entry := list
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				entry, list = list[j+1:], list[:j]
			} else {
				list = ""
			}
			if skip > 0 {
				skip--
				continue
			}
			a, err := netip.ParseAddr(strings.TrimSpace(entry))
			if err != nil {
				return netip.Addr{}, false
			}
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
