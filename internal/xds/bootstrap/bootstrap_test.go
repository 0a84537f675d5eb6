package bootstrap

import (
	"os"
	"path/filepath"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
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

func TestTLSAddsAnUpstreamTLSTransportSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "envoy.json")
	o := Options{XDSAddress: "portico.portico-system.svc:8001", TLS: &TLSFiles{
		CertFile: "/certs/client.crt", KeyFile: "/certs/client.key", CAFile: "/certs/ca.crt",
	}}
	if err := Write(path, o); err != nil {
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
	ts := b.StaticResources.Clusters[0].TransportSocket
	if ts.GetName() != "envoy.transport_sockets.tls" {
		t.Fatalf("transport socket = %v", ts)
	}
	var up tlsv3.UpstreamTlsContext
	if err := ts.GetTypedConfig().UnmarshalTo(&up); err != nil {
		t.Fatal(err)
	}
	if up.Sni != "portico.portico-system.svc" {
		t.Errorf("sni = %q, want the xDS host", up.Sni)
	}
	c := up.CommonTlsContext
	if len(c.TlsCertificates) != 1 || c.TlsCertificates[0].CertificateChain.GetFilename() != "/certs/client.crt" || c.TlsCertificates[0].PrivateKey.GetFilename() != "/certs/client.key" {
		t.Errorf("tls_certificates = %v", c.TlsCertificates)
	}
	vc := c.GetValidationContext()
	if vc.GetTrustedCa().GetFilename() != "/certs/ca.crt" {
		t.Errorf("trusted_ca = %v", vc.GetTrustedCa())
	}
	if m := vc.GetMatchTypedSubjectAltNames(); len(m) != 1 || m[0].Matcher.GetExact() != "portico.portico-system.svc" {
		t.Errorf("SAN matchers = %v", m)
	}

	o.TLS.ServerName = "xds.example"
	b2, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.StaticResources.Clusters[0].TransportSocket.GetTypedConfig().UnmarshalTo(&up); err != nil {
		t.Fatal(err)
	}
	if up.Sni != "xds.example" {
		t.Errorf("sni = %q, want --xds-tls-server-name", up.Sni)
	}

	if _, err := Build(Options{XDSAddress: "portico:8001", TLS: &TLSFiles{CertFile: "/c"}}); err == nil {
		t.Error("incomplete TLS files accepted")
	}
}

func TestNoTLSByDefault(t *testing.T) {
	b, err := Build(Options{XDSAddress: "portico:8001"})
	if err != nil {
		t.Fatal(err)
	}
	if ts := b.StaticResources.Clusters[0].TransportSocket; ts != nil {
		t.Errorf("transport socket without TLS: %v", ts)
	}
}
