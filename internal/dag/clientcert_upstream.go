package dag

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/store"
)

// UpstreamClientCertificate checks the Secret key of s as the certificate presented to
// backends over TLS: a kubernetes.io/tls Secret with a certificate and its key.
func UpstreamClientCertificate(s *store.Store, key types.NamespacedName) (*Secret, error) {
	return validTLSSecret(s.Secrets[key], key)
}

// WithClientCertificate is g presenting c to backends over TLS: g itself when it does
// already, else a copy (a graph is never modified: the previous build may be read).
func WithClientCertificate(g *Graph, c *Secret) *Graph {
	if g.UpstreamClientCertificate == c {
		return g
	}
	out := *g
	out.UpstreamClientCertificate = c
	return &out
}
