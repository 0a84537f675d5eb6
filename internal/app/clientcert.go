package app

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/store"
)

// clientCertificate is the certificate presented to backends over TLS
// (--envoy-client-certificate), checked again only when its Secret changes: a rebuild
// costs one map lookup for it.
type clientCertificate struct {
	from   *corev1.Secret // the Secret checked last (nil: none found)
	seen   bool
	secret *dag.Secret // nil when it cannot be used
}

// resolve returns the certificate of the Secret key in s, nil when it is missing or
// invalid: the graph has made the objects that need it invalid (dag.Options'
// ClientCertificate), and the reason is logged once per change.
func (c *clientCertificate) resolve(ctx context.Context, s *store.Store, key types.NamespacedName, log *slog.Logger) *dag.Secret {
	obj := s.Secrets[key]
	if c.seen && obj == c.from {
		return c.secret
	}
	c.from, c.seen = obj, true
	secret, err := dag.UpstreamClientCertificate(s, key)
	if err != nil {
		log.ErrorContext(ctx, "the client certificate for backends cannot be used: HTTPProxies with services over TLS are invalid until it is fixed",
			"flag", "--envoy-client-certificate", "secret", key.String(), "error", err.Error())
		c.secret = nil
		return nil
	}
	if c.secret != nil {
		log.InfoContext(ctx, "the client certificate for backends changed", "secret", key.String())
	}
	c.secret = secret
	return secret
}
