package dag

import (
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"

	"github.com/portico-dev/portico/internal/store"
)

// Verdict is what ValidateObject finds about one object.
type Verdict struct {
	// Ours is false when Portico does not serve the object: another ingress class,
	// Ingresses under Options.DisableIngress, or a kind the dag does not process.
	Ours bool
	// Problems make the object invalid whatever else the cluster holds. Any one of them
	// rejects the whole object; its status then says Message().
	Problems []string
	// Notes are remarks the status of the object, served, would carry about its own
	// values: timeout and retry values that fall back to a default (seed 002), unsupported
	// annotations. They never make the object invalid.
	Notes []string
}

// Message is the status description of an object with v's problems, as the status
// writer, `portico check` and the admission webhook report it. It is "" when there
// are none.
func (v Verdict) Message() string {
	if len(v.Problems) == 0 {
		return ""
	}
	return notServed(v.Problems)
}

// notServed is the description of an object rejected for problems.
func notServed(problems []string) string {
	return "not served: " + strings.Join(capped(problems), "; ")
}

// ValidateObject says whether Portico serves obj (an Ingress or an IngressRoute) and
// what makes it invalid on its own: the checks of a build that look at nothing but the
// object and opts, with the same messages. The class of an Ingress is decided as in a
// build, from the IngressClasses in s (nil means none are known).
//
// Problems that depend on other objects are not reported, and the build reports them
// in the object's status: a host or path that an older object holds, a missing Service
// or Secret, delegations (orphans, cycles, refusals).
//
// Adding a kind is one case here: its class decision and its static validation.
func ValidateObject(obj runtime.Object, s *store.Store, opts Options) Verdict {
	if s == nil {
		s = &store.Store{}
	}
	// The client certificate for backends is the installation's, not the object's:
	// while it is unusable, objects are admitted and their status says so.
	opts.ClientCertificate = nil
	b := &builder{store: s, opts: opts.withDefaults()}
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return b.validateIngressObject(o)
	case *ingressroutev1.IngressRoute:
		return b.validateIngressRouteObject(o)
	case *contourv1.HTTPProxy:
		return b.validateHTTPProxyObject(o)
	case *contourv1alpha1.ExtensionService:
		var c proxyCheck
		validateExtensionService(&o.Spec, &c)
		return Verdict{Ours: true, Problems: problemMessages(c.errors), Notes: problemMessages(c.warnings)}
	}
	return Verdict{}
}

// validateHTTPProxyObject follows proxyGraph and candidateProxyRoots: the object's own
// checks, and its routes translated (policies are checked where they are translated).
// Warnings (fields Portico ignores, an include's permitInsecure) are its notes.
func (b *builder) validateHTTPProxyObject(p *contourv1.HTTPProxy) Verdict {
	if _, other := b.proxyClass(p); other {
		return Verdict{}
	}
	if b.clusters == nil {
		b.clusters = map[clusterKey]*Cluster{}
	}
	n := &proxyNode{p: p, ref: ObjectRef{Kind: KindHTTPProxy, Namespace: p.Namespace, Name: p.Name}}
	if reason := p.Annotations[contourv1.DecodeErrorAnnotation]; reason != "" {
		n.check.fail(problemSpec, "SpecUnreadable", "its spec cannot be read: %s; fix that field", reason)
	} else {
		routeConds, _ := validateHTTPProxy(p, &n.check)
		if !b.opts.RateLimitService {
			warnGlobalUnenforced(p, &n.check)
		}
		// Services, Secrets and other objects are not looked at: only problems of the
		// object itself count here.
		var own proxyCheck
		b.proxyRoutePlans(n, routeConds, &own)
		n.check.errors = append(n.check.errors, withoutLookups(own.errors)...)
		n.check.warnings = append(n.check.warnings, withoutLookups(own.warnings)...)
		if n.usable() && n.isRoot() {
			if ns := b.opts.RootNamespaces; len(ns) > 0 && !slices.Contains(ns, p.Namespace) {
				n.check.fail(problemRootNS, "RootProxyNotAllowedInNamespace", "root HTTPProxies (with spec.virtualhost) are only allowed in namespaces %s; ask an administrator of those namespaces to include this object instead", strings.Join(ns, ", "))
			}
		}
	}
	return Verdict{Ours: true, Problems: problemMessages(n.check.errors), Notes: problemMessages(n.check.warnings)}
}

// withoutLookups drops the problems that depend on other objects (a CA Secret that is
// missing or not delegated, a Service missing or with bad annotations): the webhook
// must admit an object created before its Secret or Service.
func withoutLookups(ps []Problem) []Problem {
	return slices.DeleteFunc(ps, func(p Problem) bool {
		return p.Reason == "CASecretInvalid" || p.Reason == "CASecretNotDelegated" || p.Reason == "ServiceUnresolved" || p.Reason == "AnnotationInvalid"
	})
}

// validateIngressObject follows processIngresses up to the checks that need no other
// Ingress.
func (b *builder) validateIngressObject(ing *networkingv1.Ingress) Verdict {
	if b.opts.DisableIngress || !b.ingressClass(ing, b.defaultClasses()).ours {
		return Verdict{}
	}
	_, _, notes := ingressPolicies(ing)
	return Verdict{Ours: true, Problems: validateIngress(ing), Notes: notes}
}

// validateIngressRouteObject follows ingressRouteGraph and candidateRoots.
func (b *builder) validateIngressRouteObject(ir *ingressroutev1.IngressRoute) Verdict {
	if _, other := b.ingressRouteClass(ir); other {
		return Verdict{}
	}
	n := &irNode{ir: ir, invalid: ingressRouteProblems(ir)}
	if n.usable() && n.isRoot() {
		b.checkRootNamespaces([]*irNode{n})
	}
	v := Verdict{Ours: true, Problems: n.invalid}
	if len(v.Problems) == 0 {
		for i := range ir.Spec.Routes {
			r := &ir.Spec.Routes[i]
			if r.Delegate == nil {
				_, _, notes := routePolicies(r, routeField(r))
				v.Notes = append(v.Notes, notes...)
			}
		}
	}
	return v
}

// ingressRouteProblems returns what makes ir unusable on its own: that its spec could
// not be decoded, or what validateIngressRoute finds.
func ingressRouteProblems(ir *ingressroutev1.IngressRoute) []string {
	if reason := ir.Annotations[ingressroutev1.DecodeErrorAnnotation]; reason != "" {
		return []string{"its spec cannot be read: " + reason + "; fix that field"}
	}
	return validateIngressRoute(ir)
}
