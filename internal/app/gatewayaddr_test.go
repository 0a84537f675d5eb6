package app

import "testing"

func TestGatewayListenersMoveToLocalPorts(t *testing.T) {
	bind := gatewayBindAddress("127.0.0.1", DefaultGatewayPortOffset)
	for _, tc := range []struct{ listener, address, want string }{
		{"gateway/infra/public/80", "0.0.0.0:80", "127.0.0.1:10080"},
		{"gateway/infra/public/443", "0.0.0.0:443", "127.0.0.1:10443"},
		{"gateway/infra/public/60000", "0.0.0.0:60000", "127.0.0.1:60000"}, // no room above it
		{"ingress_http", "0.0.0.0:8080", "0.0.0.0:8080"},                   // not a Gateway's
		{"gateway/infra/public/80", "not an address", "not an address"},
	} {
		if got := bind(tc.listener, tc.address); got != tc.want {
			t.Errorf("%s at %s binds %s, want %s", tc.listener, tc.address, got, tc.want)
		}
	}
	if got := gatewayBindAddress("::1", 0)("gateway/a/b/8080", "0.0.0.0:8080"); got != "[::1]:8080" {
		t.Errorf("offset 0 on ::1 binds %s, want [::1]:8080", got)
	}
}
