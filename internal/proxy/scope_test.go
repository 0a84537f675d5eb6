package proxy

import "github.com/portico-dev/portico/internal/proxy/xdsclient"
import "testing"

// TestNodeMetadataNamesTheListenersServed: the server narrows the listeners it sends by
// these fields (internal/xds/server/scope.go holds its copies of the keys).
func TestNodeMetadataNamesTheListenersServed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		gateway string
		all     bool
	}{
		{"shared data plane", Config{}, "", false},
		{"a Gateway's", Config{Gateway: "infra/blue"}, "infra/blue", false},
		{"portico run's", Config{AllListeners: true}, "", true},
	} {
		md := New(tc.cfg).nodeMetadata().GetFields()
		if got := md[xdsclient.GatewayMetadataKey].GetStringValue(); got != tc.gateway {
			t.Errorf("%s: %s = %q, want %q", tc.name, xdsclient.GatewayMetadataKey, got, tc.gateway)
		}
		if got := md[xdsclient.AllListenersMetadataKey].GetBoolValue(); got != tc.all {
			t.Errorf("%s: %s = %v, want %v", tc.name, xdsclient.AllListenersMetadataKey, got, tc.all)
		}
		if !md[xdsclient.VHDSMetadataKey].GetBoolValue() {
			t.Errorf("%s: the proxy must still ask for VHDS", tc.name)
		}
	}
}
