package dag

import (
	"strings"

	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// planTLS adds the TLS hosts of an Ingress to its plan. A secret that is missing or does
// not hold a matching certificate and key makes the Ingress invalid and leaves its hosts
// without HTTPS; their plain-HTTP routes are still served.
func (b *builder) planTLS(ing *networkingv1.Ingress, plan *ingressPlan, ruleHosts []string) {
	own := map[string]bool{}
	for _, h := range ruleHosts {
		if h != catchAll {
			own[h] = true
		}
	}
	for i, t := range ing.Spec.TLS {
		field := fmt.Sprintf("spec.tls[%d]", i)
		var hosts []string
		for _, h := range t.Hosts {
			// A certificate only attaches to hosts this Ingress routes: otherwise any team
			// could put its certificate in front of another team's host.
			if !own[h] {
				plan.warnings = append(plan.warnings, fmt.Sprintf("%s: host %q has no rule in this Ingress, so this Ingress does not serve it over TLS; add a rule for it", field, h))
				continue
			}
			hosts = append(hosts, h)
		}
		if len(t.Hosts) == 0 {
			// No hosts: the certificate covers every host the Ingress has rules for.
			for _, h := range ruleHosts {
				if h != catchAll {
					hosts = append(hosts, h)
				}
			}
		}
		if len(hosts) == 0 {
			continue
		}
		if t.SecretName == "" {
			plan.errs = append(plan.errs, fmt.Sprintf("%s.secretName is empty: HTTPS is not served for %v; name a kubernetes.io/tls Secret in namespace %s", field, hosts, ing.Namespace))
			continue
		}
		if msgs := isDNS1123Subdomain(t.SecretName); len(msgs) > 0 {
			plan.errs = append(plan.errs, fmt.Sprintf("%s.secretName %q is not a valid Secret name (%s): HTTPS is not served for %v", field, t.SecretName, strings.Join(msgs, "; "), hosts))
			continue
		}
		key := types.NamespacedName{Namespace: ing.Namespace, Name: t.SecretName}
		secret, err := b.tlsSecret(key)
		if err != nil {
			plan.errs = append(plan.errs, fmt.Sprintf("%s: %v: HTTPS is not served for %v", field, err, hosts))
			continue
		}
		for _, h := range hosts {
			plan.tls = append(plan.tls, plannedTLS{claim: claim{host: h, kind: claimTLS}, secret: secret})
		}
	}
}

// tlsSecret returns the validated certificate of a Secret, checking each Secret once per
// build however many hosts use it (parsing keys is the costly part of a build).
func (b *builder) tlsSecret(key types.NamespacedName) (*Secret, error) {
	return b.secrets.get(key, b.store.Secrets[key])
}

// secretCache holds the Secrets checked in one build. Ingresses are planned in parallel,
// so it is safe for concurrent use; a Secret wanted by several at once is checked once,
// and they all get the same *Secret.
type secretCache struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*checkedSecret
}

type checkedSecret struct {
	once   sync.Once
	secret *Secret
	err    error
}

// get returns the check of s, the Secret named key (nil if there is none).
func (c *secretCache) get(key types.NamespacedName, s *corev1.Secret) (*Secret, error) {
	c.mu.Lock()
	r := c.m[key]
	if r == nil {
		if c.m == nil {
			c.m = map[types.NamespacedName]*checkedSecret{}
		}
		r = &checkedSecret{}
		c.m[key] = r
	}
	c.mu.Unlock()
	r.once.Do(func() { r.secret, r.err = validTLSSecret(s, key) })
	return r.secret, r.err
}

// validTLSSecret checks that a Secret holds a PEM certificate chain and the private key
// that matches it.
func validTLSSecret(s *corev1.Secret, key types.NamespacedName) (*Secret, error) {
	if s == nil {
		return nil, fmt.Errorf("Secret %s not found", key)
	}
	cert, pk := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(cert) == 0 || len(pk) == 0 {
		return nil, fmt.Errorf("Secret %s must hold %q and %q", key, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	pair, err := tls.X509KeyPair(cert, pk)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: invalid certificate or key: %v", key, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("Secret %s: invalid certificate: %v", key, err)
	}
	if time.Now().After(leaf.NotAfter) {
		return nil, fmt.Errorf("Secret %s: certificate expired on %s", key, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &Secret{Name: key.String(), Cert: cert, Key: pk}, nil
}

// validCABundle reports whether pem holds at least one certificate.
// ValidCABundle reports whether pem holds at least one PEM certificate, as a CA
// bundle must (for the APIs processed outside this package).
func ValidCABundle(pem []byte) bool { return validCABundle(pem) }

func validCABundle(pem []byte) bool {
	return x509.NewCertPool().AppendCertsFromPEM(pem)
}
