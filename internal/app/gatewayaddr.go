package app

import (
	"net"
	"strconv"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// DefaultGatewayPortOffset is how far `portico run` moves a Gateway listener's port by
// default: port 80 is served on 10080 and 443 on 10443, which need no privileges and
// stay clear of run's own 8080, 8443 and 8090.
const DefaultGatewayPortOffset = 10000

// gatewayBindAddress maps the listeners of Gateways onto this machine, for `portico run`:
// a listener on port P binds host:P+offset (P itself when that is not a port). The
// shared listeners (Ingress, IngressRoute, HTTPProxy) are not Gateways': their address
// is left as it is.
func gatewayBindAddress(host string, offset int) func(listener, address string) string {
	return func(listener, address string) string {
		if _, ok := translate.GatewayOf(listener); !ok {
			return address
		}
		_, p, err := net.SplitHostPort(address)
		if err != nil {
			return address
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			return address
		}
		return net.JoinHostPort(host, strconv.Itoa(GatewayLocalPort(port, offset)))
	}
}

// GatewayLocalPort is the port `portico run` serves a Gateway listener of port on.
func GatewayLocalPort(port, offset int) int {
	if moved := port + offset; moved > 0 && moved <= 65535 {
		return moved
	}
	return port
}
