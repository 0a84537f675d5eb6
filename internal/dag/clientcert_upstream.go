package dag

import (
	"fmt"

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

// clientCertificateProblem says why the installation's client certificate for backends
// (Options.ClientCertificate) cannot be presented to a backend over TLS, or "" when it
// can or none is configured. The Secret is checked once per build (the secret cache),
// however many services speak TLS.
func (b *builder) clientCertificateProblem() string {
	key := b.opts.ClientCertificate
	if key == nil {
		return ""
	}
	if _, err := b.tlsSecret(*key); err != nil {
		return fmt.Sprintf("the client certificate presented to backends over TLS (--envoy-client-certificate %s) cannot be used: %v; give that Secret a valid tls.crt and tls.key (kubernetes.io/tls), or start Portico with another Secret", key, err)
	}
	return ""
}

// overTLS says that a service's protocol connects to its backend over TLS, where the
// client certificate for backends is presented.
func overTLS(protocol string) bool { return protocol == "tls" || protocol == "h2" }
