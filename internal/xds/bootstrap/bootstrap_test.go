package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/portico-dev/portico/internal/xds/server"
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
	if p := b.Admin.Address.GetPipe(); p.GetPath() != "/tmp/envoy-admin.sock" || p.GetMode() != 0o600 {
		t.Errorf("admin must default to a Unix socket only Envoy's user can use, got %v", b.Admin.Address)
	}
	if b.DynamicResources.LdsConfig.GetAds() == nil || b.DynamicResources.CdsConfig.GetAds() == nil {
		t.Error("listeners and clusters must come over ADS")
	}
	if got := b.DynamicResources.AdsConfig.GetApiType(); got != corev3.ApiConfigSource_DELTA_GRPC {
		t.Errorf("ADS api_type = %v, want DELTA_GRPC (incremental xDS)", got)
	}
}

func TestBadAddressesAreRejected(t *testing.T) {
	for _, addr := range []string{"", "nohost", ":8001", "h:0", "h:99999"} {
		if _, err := Build(Options{XDSAddress: addr}); err == nil {
			t.Errorf("xDS address %q: want an error", addr)
		}
	}
}

func TestTLSReadsRotatableFilesThroughSDS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "envoy.json")
	o := Options{XDSAddress: "portico.portico-system.svc:8001", TLS: &TLSFiles{
		CertFile: "/certs/tls.crt", KeyFile: "/certs/tls.key", CAFile: "/certs/ca.crt",
	}}
	if err := Write(path, o); err != nil {
		t.Fatal(err)
	}
	b := readBootstrap(t, Options{}, path)
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
	if len(c.TlsCertificates) != 0 || c.GetValidationContext() != nil {
		t.Fatal("certificates named inline are read once and never rotate; want SDS")
	}
	sdsPath := func(s *tlsv3.SdsSecretConfig) string { return s.GetSdsConfig().GetPathConfigSource().GetPath() }
	if len(c.TlsCertificateSdsSecretConfigs) != 1 || sdsPath(c.TlsCertificateSdsSecretConfigs[0]) != filepath.Join(dir, SDSCertificateFile) {
		t.Fatalf("tls_certificate_sds_secret_configs = %v", c.TlsCertificateSdsSecretConfigs)
	}
	if got := sdsPath(c.GetValidationContextSdsSecretConfig()); got != filepath.Join(dir, SDSValidationFile) {
		t.Fatalf("validation context SDS path = %q", got)
	}

	// The SDS files, as Envoy reads them: a DiscoveryResponse of one Secret each.
	readSecret := func(name string) *tlsv3.Secret {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var resp discoveryv3.DiscoveryResponse
		if err := protojson.Unmarshal(data, &resp); err != nil {
			t.Fatal(err)
		}
		if len(resp.Resources) != 1 {
			t.Fatalf("%s: %d resources, want 1", name, len(resp.Resources))
		}
		var sec tlsv3.Secret
		if err := resp.Resources[0].UnmarshalTo(&sec); err != nil {
			t.Fatal(err)
		}
		if err := sec.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		return &sec
	}
	cert := readSecret(SDSCertificateFile).GetTlsCertificate()
	if cert.GetCertificateChain().GetFilename() != "/certs/tls.crt" || cert.GetPrivateKey().GetFilename() != "/certs/tls.key" {
		t.Errorf("certificate = %v", cert)
	}
	// A Secret volume is updated by moving a new directory into /certs: the watch must
	// be on that directory.
	if cert.GetWatchedDirectory().GetPath() != "/certs" {
		t.Errorf("certificate watched_directory = %v, want /certs", cert.GetWatchedDirectory())
	}
	vc := readSecret(SDSValidationFile).GetValidationContext()
	if vc.GetTrustedCa().GetFilename() != "/certs/ca.crt" || vc.GetWatchedDirectory().GetPath() != "/certs" {
		t.Errorf("validation context = %v", vc)
	}
	if m := vc.GetMatchTypedSubjectAltNames(); len(m) != 1 || m[0].Matcher.GetExact() != "portico.portico-system.svc" {
		t.Errorf("SAN matchers = %v", m)
	}

	o.TLS.ServerName = "xds.example"
	o.SDSDir = dir
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
	files, err := SDSFiles(o)
	if err != nil {
		t.Fatal(err)
	}
	var sec tlsv3.Secret
	if err := files[SDSValidationFile].Resources[0].UnmarshalTo(&sec); err != nil {
		t.Fatal(err)
	}
	if got := sec.GetValidationContext().GetMatchTypedSubjectAltNames()[0].Matcher.GetExact(); got != "xds.example" {
		t.Errorf("SAN matcher %q, want --xds-tls-server-name", got)
	}

	if _, err := Build(Options{XDSAddress: "portico:8001", SDSDir: dir, TLS: &TLSFiles{CertFile: "/c"}}); err == nil {
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

// readBootstrap writes the bootstrap of o (unless written already, to path) and reads it
// back as Envoy would.
func readBootstrap(t *testing.T, o Options, written ...string) *bootstrapv3.Bootstrap {
	t.Helper()
	var path string
	if len(written) > 0 {
		path = written[0]
	} else {
		path = filepath.Join(t.TempDir(), "envoy.json")
		if err := Write(path, o); err != nil {
			t.Fatal(err)
		}
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
	return &b
}

// Envoy's Prometheus stats and readiness are reachable on the stats listener (0.0.0.0:8002
// by default), routed to the admin interface, which itself stays on loopback.
func TestStatsListenerServesPrometheusStatsFromTheAdminInterface(t *testing.T) {
	for _, tc := range []struct {
		name            string
		opts            Options
		statsHost       string
		statsPort       uint32
		adminHost       string
		adminPort       uint32
		adminKindStatic bool
	}{
		{"loopback", Options{XDSAddress: "portico:8001", AdminAddress: "127.0.0.1:9001"}, "0.0.0.0", 8002, "127.0.0.1", 9001, true},
		{"configured", Options{XDSAddress: "portico:8001", StatsAddress: "[::]:9102", AdminAddress: "localhost:9901"}, "::", 9102, "localhost", 9901, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := readBootstrap(t, tc.opts)
			if len(b.StaticResources.Listeners) != 1 {
				t.Fatalf("static listeners = %d, want the stats listener only", len(b.StaticResources.Listeners))
			}
			l := b.StaticResources.Listeners[0]
			if a := l.Address.GetSocketAddress(); l.Name != StatsListener || a.Address != tc.statsHost || a.GetPortValue() != tc.statsPort {
				t.Errorf("stats listener %q at %v, want %q at %s:%d", l.Name, a, StatsListener, tc.statsHost, tc.statsPort)
			}
			var hcm hcmv3.HttpConnectionManager
			if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				t.Fatal(err)
			}
			routes := map[string]string{}
			for _, vh := range hcm.GetRouteConfig().GetVirtualHosts() {
				for _, r := range vh.Routes {
					if h := r.Match.Headers; len(h) != 1 || h[0].Name != ":method" || h[0].GetStringMatch().GetExact() != "GET" {
						t.Errorf("route %s: want GET only, got header matchers %v", r.Match.GetPath(), h)
					}
					routes[r.Match.GetPath()] = r.GetRoute().GetCluster()
				}
			}
			want := map[string]string{"/stats/prometheus": AdminCluster, "/ready": AdminCluster}
			if diff := cmp.Diff(want, routes); diff != "" {
				t.Errorf("stats listener routes, exact path → cluster (-want +got):\n%s", diff)
			}
			var admin *clusterv3.Cluster
			for _, c := range b.StaticResources.Clusters {
				if c.Name == AdminCluster {
					admin = c
				}
			}
			if admin == nil {
				t.Fatalf("no %s cluster", AdminCluster)
			}
			ep := admin.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress()
			if ep.Address != tc.adminHost || ep.GetPortValue() != tc.adminPort {
				t.Errorf("admin cluster endpoint %v, want %s:%d", ep, tc.adminHost, tc.adminPort)
			}
			if (admin.GetType() == clusterv3.Cluster_STATIC) != tc.adminKindStatic {
				t.Errorf("admin cluster type %v", admin.GetType())
			}
			if a := b.Admin.Address.GetSocketAddress(); a.Address != tc.adminHost || a.GetPortValue() != tc.adminPort {
				t.Errorf("admin interface at %v, want %s:%d", a, tc.adminHost, tc.adminPort)
			}
		})
	}
}

// By default the admin interface is a Unix socket, which no cluster can reach, and the
// stats listener reaches it through that socket.
func TestAdminInterfaceIsAUnixSocketByDefault(t *testing.T) {
	b := readBootstrap(t, Options{XDSAddress: "portico:8001"})
	var admin *clusterv3.Cluster
	for _, c := range b.StaticResources.Clusters {
		if c.Name == AdminCluster {
			admin = c
		}
	}
	ep := admin.GetLoadAssignment().GetEndpoints()[0].LbEndpoints[0].GetEndpoint().Address
	if ep.GetPipe().GetPath() != "/tmp/envoy-admin.sock" || admin.GetType() != clusterv3.Cluster_STATIC {
		t.Errorf("admin cluster %v reaches %v, want the Unix socket", admin.GetType(), ep)
	}
	if a := b.StaticResources.Listeners[0].Address.GetSocketAddress(); a.Address != "0.0.0.0" || a.GetPortValue() != 8002 {
		t.Errorf("stats listener at %v, want 0.0.0.0:8002", a)
	}
	for _, bad := range []string{"unix:relative.sock", "unix:"} {
		if _, err := Build(Options{XDSAddress: "portico:8001", AdminAddress: bad}); err == nil {
			t.Errorf("admin address %q accepted", bad)
		}
	}
}

func TestAdminInterfaceStaysOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9001", "10.0.0.1:9001", "[::]:9001", "envoy.example:9001"} {
		if _, err := Build(Options{XDSAddress: "portico:8001", AdminAddress: addr}); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("admin address %s: error %v, want a refusal naming loopback", addr, err)
		}
	}
	if _, err := Build(Options{XDSAddress: "portico:8001", AdminAddress: "[::1]:9001"}); err != nil {
		t.Errorf("IPv6 loopback admin address: %v", err)
	}
	if _, err := Build(Options{XDSAddress: "portico:8001", AdminAddress: "127.0.0.1:9001", StatsAddress: "0.0.0.0:9001"}); err == nil {
		t.Error("stats address on the admin port: want an error")
	}
}

// TestGatewayDataPlaneSaysWhichGatewayItServes: an Envoy bootstrapped for a Gateway tells
// the server so in its node metadata (else it would be sent the shared listeners), and the
// shared data plane's bootstrap says nothing of the kind.
func TestGatewayDataPlaneSaysWhichGatewayItServes(t *testing.T) {
	b, err := Build(Options{XDSAddress: "portico:8001", Gateway: "infra/public"})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Node.GetMetadata().GetFields()[server.NodeGatewayKey].GetStringValue(); got != "infra/public" {
		t.Errorf("node metadata %v, want %s: infra/public", b.Node.GetMetadata(), server.NodeGatewayKey)
	}
	shared, err := Build(Options{XDSAddress: "portico:8001"})
	if err != nil {
		t.Fatal(err)
	}
	if md := shared.Node.GetMetadata(); len(md.GetFields()) != 0 {
		t.Errorf("shared data plane's node metadata = %v, want none", md)
	}
}
