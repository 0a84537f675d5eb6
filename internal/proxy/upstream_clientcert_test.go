package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// TestUpstreamClientCertificate: a cluster whose UpstreamTlsContext names an SDS
// secret in tls_certificate_sds_secret_configs presents that certificate to the
// backend; a backend requiring a certificate from its CA refuses the cluster without
// it, and one from another CA, and accepts the same cluster once the secret holds a
// certificate it trusts (a secret change alone is applied).
func TestUpstreamClientCertificate(t *testing.T) {
	t.Parallel()
	serverCA, clientCA, otherCA := newTestCA(t), newTestCA(t), newTestCA(t)
	cert := serverCA.keyPair(t, "backend.internal")
	be := startTLSBackend(t, &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert,
		VerifyPeerCertificate: verifiedBy(clientCA.pool)})
	cp := startControlPlane(t)

	with, without := edsCluster("with"), edsCluster("without")
	with.TransportSocket = upstreamTLSSocketWith(t, &tlsv3.UpstreamTlsContext{Sni: "backend.internal", CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: "infra/envoy-client", SdsConfig: adsSource()}},
	}})
	without.TransportSocket = upstreamTLSSocketWith(t, &tlsv3.UpstreamTlsContext{Sni: "backend.internal", CommonTlsContext: &tlsv3.CommonTlsContext{}})
	vh := vhost("*", toCluster("with", separatedMatch("/with")), toCluster("without", separatedMatch("/without")))
	res := func(secretCA *testCA) resources {
		certPEM, keyPEM := secretCA.issue(t, "envoy.infra")
		return resources{
			listeners: []*listenerv3.Listener{httpListener(t)},
			routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)},
			clusters:  []*clusterv3.Cluster{with, without},
			endpoints: []*endpointv3.ClusterLoadAssignment{assignment("with", be), assignment("without", be)},
			secrets:   []*tlsv3.Secret{tlsSecret("infra/envoy-client", certPEM, keyPEM)},
		}
	}
	cp.set("v1", res(otherCA))
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, path := range []string{"/with", "/without"} {
		if r := get(t, c, p.httpURL(t, path), "x", nil); r.Status != 502 {
			t.Errorf("v1 %s: %d %q, want 502: the backend refuses the handshake", path, r.Status, r.Body)
		}
	}

	cp.set("v2", res(clientCA))
	p.waitVersion(t, "v2")
	if r := get(t, c, p.httpURL(t, "/with"), "x", nil); r.Status != 200 {
		t.Errorf("v2 /with: %d %q, want 200 with the client certificate the backend trusts", r.Status, r.Body)
	}
	if r := get(t, c, p.httpURL(t, "/without"), "x", nil); r.Status != 502 {
		t.Errorf("v2 /without: %d %q, want 502: no client certificate", r.Status, r.Body)
	}
}

// verifiedBy checks that the peer's certificate chains to roots (whatever its
// extended key usages: the test CA issues server certificates).
func verifiedBy(roots *x509.CertPool) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("no client certificate")
		}
		leaf, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return err
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		return err
	}
}
