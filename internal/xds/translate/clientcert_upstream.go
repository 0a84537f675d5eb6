package translate

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/portico-dev/portico/internal/dag"
)

// The certificate presented to backends over TLS (dag.Graph.UpstreamClientCertificate,
// Contour's tls.envoy-client-certificate) is an SDS secret that every cluster with
// upstream TLS names in tls_certificate_sds_secret_configs, as downstream certificates
// are: a renewed certificate changes the secret alone, not the clusters.

// clientSecretName is the SDS name of g's client certificate, "" for none.
func clientSecretName(g *dag.Graph) string {
	if g.UpstreamClientCertificate == nil {
		return ""
	}
	return g.UpstreamClientCertificate.Name
}

// addClientSecret adds the client certificate m (nil: none) to res, unless a secret of
// its name is there already (the same Secret serving a host too).
func addClientSecret(res *Resources, m types.Resource) {
	if m == nil {
		return
	}
	name := m.(interface{ GetName() string }).GetName()
	for _, s := range res.Secrets {
		if s.(interface{ GetName() string }).GetName() == name {
			return
		}
	}
	res.Secrets = append(res.Secrets, m)
}

// clientCertificate is the secret of c (nil: none), the previous call's while c is the
// same: the server sees an unchanged resource by its pointer.
func (t *Incremental) clientCertificate(c *dag.Secret) (types.Resource, error) {
	if c == nil {
		t.clientSource, t.clientSecret = nil, nil
		return nil, nil
	}
	if c != t.clientSource {
		m := secret(c)
		if err := validateAll(m); err != nil {
			return nil, err
		}
		t.clientSource, t.clientSecret = c, keepEqual(t.clientSecret, m)
	}
	return t.clientSecret, nil
}
