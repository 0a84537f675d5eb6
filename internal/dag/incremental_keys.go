package dag

import (
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/store"
)

// An object's keys say what it can interact with, for the incremental builder. Two kinds:
//
//   - link keys ("h:" a host name, "o:" an object that can be delegated or included to):
//     objects sharing one compete for a host or serve on each other's hosts, so they are
//     always built together (one component);
//   - dependency keys ("s:" a Service, "x:" a Secret, "e:" an ExtensionService): an
//     object is rebuilt when the Service (its endpoints included), Secret or
//     ExtensionService changes, but two objects that use the same one do not affect
//     each other. An object that names an ExtensionService depends on its Services and
//     CA Secret too, and is keyed again when the ExtensionService changes.
//
// Keys may say more than the builder uses (that only costs time); they must never say
// less, or an incremental build would differ from a full one. The property test in
// incremental_test.go holds them to that.
type objectKeys struct {
	links []string
	deps  []string
}

const (
	hostKeyPrefix = "h:"
	objKeyPrefix  = "o:"
	svcKeyPrefix  = "s:"
	secKeyPrefix  = "x:"
	extKeyPrefix  = "e:"
)

func hostKey(host string) string { return hostKeyPrefix + strings.ToLower(host) }

func objKey(kind, namespace, name string) string {
	return objKeyPrefix + kind + "/" + namespace + "/" + name
}

func nsName(namespace, name string) string { return namespace + "/" + name }

// secretRefKey is the key of a secret reference that may be "name" (in namespace) or
// "namespace/name" (delegated).
func secretRefKey(namespace, ref string) string {
	if ns, name, ok := strings.Cut(ref, "/"); ok {
		return secKeyPrefix + nsName(ns, name)
	}
	return secKeyPrefix + nsName(namespace, ref)
}

type keyBuilder struct{ k objectKeys }

func (kb *keyBuilder) host(h string) { kb.k.links = append(kb.k.links, hostKey(h)) }
func (kb *keyBuilder) obj(kind, ns, name string) {
	kb.k.links = append(kb.k.links, objKey(kind, ns, name))
}
func (kb *keyBuilder) service(ns, name string) {
	kb.k.deps = append(kb.k.deps, svcKeyPrefix+nsName(ns, name))
}
func (kb *keyBuilder) secret(ns, ref string) {
	if ref != "" {
		kb.k.deps = append(kb.k.deps, secretRefKey(ns, ref))
	}
}

// extension adds the ExtensionService ns/name, and the Services and CA Secret it
// names in s, as dependencies.
func (kb *keyBuilder) extension(s *store.Store, ns, name string) {
	kb.k.deps = append(kb.k.deps, extKeyPrefix+nsName(ns, name))
	es := s.ExtensionServices[types.NamespacedName{Namespace: ns, Name: name}]
	if es == nil {
		return
	}
	for _, t := range es.Spec.Services {
		kb.service(ns, t.Name)
	}
	if v := es.Spec.UpstreamValidation; v != nil {
		kb.secret(ns, v.CACertificate)
	}
}

// clientCertificate adds the installation's client certificate for backends as a
// dependency: whether it can be used decides the status of objects with backends over
// TLS (any backend may be annotated so: keys may say more than is used).
func (kb *keyBuilder) clientCertificate(opts Options) {
	if c := opts.ClientCertificate; c != nil {
		kb.secret(c.Namespace, c.Name)
	}
}

func ingressKeys(ing *networkingv1.Ingress, opts Options) objectKeys {
	var kb keyBuilder
	kb.obj(KindIngress, ing.Namespace, ing.Name)
	kb.clientCertificate(opts)
	backend := func(be *networkingv1.IngressServiceBackend) {
		if be != nil {
			kb.service(ing.Namespace, be.Name)
		}
	}
	if db := ing.Spec.DefaultBackend; db != nil {
		kb.host(catchAll)
		backend(db.Service)
	}
	for _, r := range ing.Spec.Rules {
		kb.host(ruleHost(r.Host))
		if r.HTTP == nil {
			continue
		}
		for _, p := range r.HTTP.Paths {
			backend(p.Backend.Service)
		}
	}
	for _, t := range ing.Spec.TLS {
		for _, h := range t.Hosts {
			kb.host(h)
		}
		kb.secret(ing.Namespace, t.SecretName)
	}
	return kb.k
}

func ingressRouteKeys(ir *ingressroutev1.IngressRoute) objectKeys {
	var kb keyBuilder
	kb.obj(KindIngressRoute, ir.Namespace, ir.Name)
	if vh := ir.Spec.VirtualHost; vh != nil {
		kb.host(vh.Fqdn)
		for _, a := range vh.Aliases {
			kb.host(a)
		}
		if vh.TLS != nil {
			kb.secret(ir.Namespace, vh.TLS.SecretName)
		}
	}
	for i := range ir.Spec.Routes {
		r := &ir.Spec.Routes[i]
		for _, s := range r.AllServices() {
			kb.service(ir.Namespace, s.Name)
		}
		if d := r.Delegate; d != nil {
			kb.obj(KindIngressRoute, defaultString(d.Namespace, ir.Namespace), d.Name)
		}
	}
	return kb.k
}

func httpProxyKeys(p *contourv1.HTTPProxy, s *store.Store, opts Options) objectKeys {
	fallback := opts.FallbackCertificate
	var kb keyBuilder
	kb.obj(KindHTTPProxy, p.Namespace, p.Name)
	kb.clientCertificate(opts)
	services := func(ss []contourv1.Service) {
		for _, s := range ss {
			kb.service(p.Namespace, s.Name)
			if v := s.UpstreamValidation; v != nil {
				kb.secret(p.Namespace, v.CACertificate)
			}
		}
	}
	if vh := p.Spec.VirtualHost; vh != nil {
		kb.host(vh.Fqdn)
		if vh.TLS != nil {
			kb.secret(p.Namespace, vh.TLS.SecretName)
			if cv := vh.TLS.ClientValidation; cv != nil {
				kb.secret(p.Namespace, cv.CACertificate)
				kb.secret(p.Namespace, cv.CertificateRevocationList)
			}
			if vh.TLS.EnableFallbackCertificate {
				// Every root served under the fallback certificate is in the one
				// secure host "*" (fallbackHost): they are built together.
				kb.host(fallbackHostName)
				if fallback != nil {
					kb.secret(fallback.Namespace, fallback.Name)
				}
			}
		}
		if a := vh.Authorization; a != nil && a.ExtensionServiceRef.Name != "" {
			kb.extension(s, defaultString(a.ExtensionServiceRef.Namespace, p.Namespace), a.ExtensionServiceRef.Name)
		} else if g := opts.GlobalAuthorization; g != nil {
			kb.extension(s, g.ExtensionService.Namespace, g.ExtensionService.Name)
		}
		for i := range vh.JWTProviders {
			if v := vh.JWTProviders[i].RemoteJWKS.UpstreamValidation; v != nil {
				kb.secret(p.Namespace, v.CACertificate)
			}
			kb.secret(p.Namespace, vh.JWTProviders[i].LocalJWKS.SecretName)
		}
	}
	for _, inc := range p.Spec.Includes {
		kb.obj(KindHTTPProxy, defaultString(inc.Namespace, p.Namespace), inc.Name)
	}
	for i := range p.Spec.Routes {
		services(p.Spec.Routes[i].Services)
	}
	if tp := p.Spec.TCPProxy; tp != nil {
		services(tp.Services)
		for _, inc := range []*contourv1.TCPProxyInclude{tp.Include, tp.IncludesDeprecated} {
			if inc != nil {
				kb.obj(KindHTTPProxy, defaultString(inc.Namespace, p.Namespace), inc.Name)
			}
		}
	}
	return kb.k
}

func defaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// wildcardAbove returns the link key of the single-label wildcard that covers a precise
// host key ("h:a.b.c" → "h:*.b.c"): a wildcard certificate serves the precise hosts
// under it (SecureVirtualHost.Also), so the two are built together when both exist.
func wildcardAbove(key string) (string, bool) {
	host, ok := strings.CutPrefix(key, hostKeyPrefix)
	if !ok || strings.HasPrefix(host, "*") {
		return "", false
	}
	_, parent, ok := strings.Cut(host, ".")
	if !ok || parent == "" {
		return "", false
	}
	return hostKeyPrefix + "*." + parent, true
}

// wildcardDomain returns "b.c" for the wildcard key "h:*.b.c".
func wildcardDomain(key string) (string, bool) {
	return strings.CutPrefix(key, hostKeyPrefix+"*.")
}

// parentDomain returns "b.c" for the precise host key "h:a.b.c".
func parentDomain(key string) (string, bool) {
	host, ok := strings.CutPrefix(key, hostKeyPrefix)
	if !ok || strings.HasPrefix(host, "*") {
		return "", false
	}
	_, parent, ok := strings.Cut(host, ".")
	return parent, ok && parent != ""
}
