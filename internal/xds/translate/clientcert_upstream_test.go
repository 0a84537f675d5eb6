package translate

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/portico-dev/portico/internal/dag"
)

// The installation's client certificate is named by every cluster with upstream TLS
// (an SDS secret, sent once, also when a host serves the same Secret) and by no
// clear-text cluster, in the full and the incremental translation alike; the
// incremental one keeps the secret's resource while the certificate is the same.
func TestUpstreamClientCertificateTranslate(t *testing.T) {
	tlsWeb, plain := testCluster("team", "web", 443), testCluster("team", "api", 80)
	tlsWeb.Protocol = "tls"
	cert := &dag.Secret{Name: "infra/envoy-client", Cert: []byte("cert"), Key: []byte("key")}
	vh := dag.VirtualHost{Name: "a.com", Routes: []*dag.Route{route(dag.PathPrefix, "/web", tlsWeb), route(dag.PathPrefix, "/", plain)}}
	graph := func(c *dag.Secret, hostSecret *dag.Secret) *dag.Graph {
		return &dag.Graph{HTTP: []*dag.VirtualHost{&vh}, HTTPS: []*dag.SecureVirtualHost{{VirtualHost: vh, Secret: hostSecret}}, UpstreamClientCertificate: c}
	}
	hostCert := &dag.Secret{Name: "team/a", Cert: []byte("a"), Key: []byte("k")}
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, res *Resources, want string) {
		t.Helper()
		checkMarshal(t, res)
		for _, r := range res.Clusters {
			c := r.(*clusterv3.Cluster)
			var got string
			if c.TransportSocket != nil {
				var ctx tlsv3.UpstreamTlsContext
				if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(&ctx); err != nil {
					t.Fatal(err)
				}
				for _, sds := range ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs {
					got += sds.Name
				}
			} else if c.Name != plain.Name {
				t.Errorf("%s: cluster %s has no TLS", name, c.Name)
			}
			if wantHere := map[bool]string{true: want, false: ""}[c.Name == tlsWeb.Name]; got != wantHere {
				t.Errorf("%s: cluster %s names client secrets %q, want %q", name, c.Name, got, wantHere)
			}
		}
		n := 0
		for _, s := range res.Secrets {
			if s.(*tlsv3.Secret).Name == cert.Name {
				n++
			}
		}
		if want := map[bool]int{true: 1, false: 0}[want != ""]; n != want {
			t.Errorf("%s: %d secrets %s, want %d", name, n, cert.Name, want)
		}
	}
	for _, c := range []struct {
		name       string
		cert, host *dag.Secret
		want       string
	}{
		{"none", nil, hostCert, ""},
		{"set", cert, hostCert, cert.Name},
		{"also a host's", cert, cert, cert.Name},
		{"removed", nil, hostCert, ""},
	} {
		full, err := Translate(graph(c.cert, c.host), Options{})
		if err != nil {
			t.Fatal(err)
		}
		check(c.name+" (full)", full, c.want)
		res, err := inc.Translate(graph(c.cert, c.host))
		if err != nil {
			t.Fatal(err)
		}
		check(c.name+" (incremental)", res, c.want)
	}
	first, _ := inc.Translate(graph(cert, hostCert))
	again, _ := inc.Translate(graph(cert, hostCert))
	if secretNamed(first, cert.Name) != secretNamed(again, cert.Name) {
		t.Error("the same certificate made a new secret resource: the server would publish it again")
	}
}

func secretNamed(res *Resources, name string) types.Resource {
	for _, s := range res.Secrets {
		if s.(*tlsv3.Secret).Name == name {
			return s
		}
	}
	return nil
}
