package bootstrap

import (
	"os"
	"path/filepath"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestWriteProducesAValidBootstrap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "envoy.json")
	if err := Write(path, Options{XDSAddress: "portico.portico-system.svc:8001"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	xds := b.StaticResources.Clusters[0].LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress()
	if xds.Address != "portico.portico-system.svc" || xds.GetPortValue() != 8001 {
		t.Errorf("xDS endpoint = %v", xds)
	}
	if a := b.Admin.Address.GetSocketAddress(); a.Address != "127.0.0.1" {
		t.Errorf("admin must default to loopback, got %v", a)
	}
	if b.DynamicResources.LdsConfig.GetAds() == nil || b.DynamicResources.CdsConfig.GetAds() == nil {
		t.Error("listeners and clusters must come over ADS")
	}
}

func TestBadAddressesAreRejected(t *testing.T) {
	for _, addr := range []string{"", "nohost", ":8001", "h:0", "h:99999"} {
		if _, err := Build(Options{XDSAddress: addr}); err == nil {
			t.Errorf("xDS address %q: want an error", addr)
		}
	}
}
