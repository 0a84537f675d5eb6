package dag

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/portico-dev/portico/internal/parallel"
)

// KindIngress is the ObjectRef kind of Ingresses.
const KindIngress = "Ingress"

// catchAll is the virtual host for requests whose host matches no other virtual host.
const catchAll = "*"

// claimKind distinguishes what an Ingress claims on a host.
type claimKind int

const (
	claimExact claimKind = iota
	claimPrefix
	// claimDefault is whatever serves every path of a host that no longer rule matches:
	// a Prefix "/" rule or a defaultBackend. They are one claim, so that a newer Ingress
	// can take neither a host's "/" nor its default backend from an older one.
	claimDefault
	claimTLS
)

// claim is what an Ingress asks to own. Two Ingresses may not own the same claim.
type claim struct {
	host string
	kind claimKind
	path string
}

func (c claim) String() string {
	host := c.host
	if host == catchAll {
		host = "* (any host)"
	}
	switch c.kind {
	case claimExact:
		return fmt.Sprintf("host %s, Exact path %q", host, c.path)
	case claimPrefix:
		return fmt.Sprintf("host %s, Prefix path %q", host, c.path)
	case claimDefault:
		return fmt.Sprintf("host %s, Prefix path \"/\" or default backend", host)
	default:
		return fmt.Sprintf("host %s, TLS certificate", host)
	}
}

// ingressPlan is what one well-formed Ingress would add to the graph.
type ingressPlan struct {
	ref      ObjectRef
	routes   []plannedRoute
	defaults []plannedRoute // defaultBackend routes for the Ingress's own hosts, added after all rules
	// catchAll is the defaultBackend's route for requests matching no host. Only one
	// Ingress can serve it; the oldest does, and the others are told.
	catchAll *plannedRoute
	tls      []plannedTLS
	errs     []string // problems that do not stop the routes from being served
	warnings []string
	// timeouts and retry come from the Ingress's annotations and apply to all its routes.
	timeouts *TimeoutPolicy
	retry    *RetryPolicy
}

type plannedRoute struct {
	claim   claim
	backend *networkingv1.IngressServiceBackend
}

type plannedTLS struct {
	claim  claim
	secret *Secret
}

// processIngresses adds every Ingress of Portico's class to the graph. Ingresses are
// considered oldest first; an Ingress that claims a host and path (or a default backend,
// or a TLS host) that an older one already owns is rejected whole, so a newcomer can never
// take traffic away from a working Ingress.
//
// A host that an IngressRoute root claims belongs to whichever of the two is older; on a
// tie, to the root.
func (b *builder) processIngresses(rootHosts map[string]hostRoot) {
	// Each Ingress is checked and planned on its own, in parallel on a large store; what
	// depends on the others (conflicts, the graph) follows in order.
	all := b.store.SortedIngresses()
	screened := make([]screenedIngress, len(all))
	defaults := b.defaultClasses()
	_ = parallel.Do(len(all), func(i int) error {
		screened[i] = b.screenIngress(all[i], defaults)
		return nil
	})
	var candidates []*networkingv1.Ingress
	for i, ing := range all {
		if s := screened[i]; s.status != "" {
			b.setStatus(ObjectRef{Kind: KindIngress, Namespace: ing.Namespace, Name: ing.Name}, s.status, s.reason)
			continue
		}
		candidates = append(candidates, ing)
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		ti, tj := candidates[i].CreationTimestamp, candidates[j].CreationTimestamp
		return ti.Before(&tj)
	})
	plans := make([]*ingressPlan, len(candidates))
	_ = parallel.Do(len(candidates), func(i int) error {
		plans[i] = b.planIngress(candidates[i])
		return nil
	})

	owners := make(map[claim]ObjectRef, 2*len(candidates))
	notes := map[ObjectRef][]string{}
	var accepted []*ingressPlan
	for i, ing := range candidates {
		plan := plans[i]
		conflicts := conflictsOf(plan, owners, notes)
		if taken := rootConflicts(ing, plan, rootHosts); len(taken) > 0 {
			b.setStatus(plan.ref, StatusInvalid, "not served: "+strings.Join(taken, "; ")+"; use another host, or ask the owner of that root to delegate a path to you")
			continue
		}
		if c := plan.catchAll; c != nil {
			if owner, taken := owners[c.claim]; taken {
				// Losing the catch-all is not a reason to reject an Ingress that has
				// rules of its own: its default backend still serves its own hosts.
				loss := fmt.Sprintf("its defaultBackend does not serve requests for unknown hosts: Ingress %s/%s, which is older, does", owner.Namespace, owner.Name)
				if len(plan.claims()) == 0 {
					conflicts = append(conflicts, loss)
				} else {
					plan.warnings = append(plan.warnings, loss)
				}
				plan.catchAll = nil
			}
		}
		if len(conflicts) > 0 {
			b.setStatus(plan.ref, StatusInvalid, "not served: conflicts with older Ingresses: "+strings.Join(conflicts, "; ")+
				"; remove or change these rules in one of the Ingresses")
			continue
		}
		for _, c := range plan.claims() {
			owners[c] = plan.ref
		}
		if plan.catchAll != nil {
			owners[plan.catchAll.claim] = plan.ref
		}
		accepted = append(accepted, plan)
	}
	for _, plan := range accepted {
		b.applyIngressPlan(plan)
	}
	b.addHostDefaults(accepted)
	b.copyRoutesToSecureHosts()
	for _, plan := range accepted {
		b.setIngressStatus(plan, notes[plan.ref])
	}
}

// screenedIngress is the status of an Ingress that is not Portico's or is not valid
// on its own; status is empty for the others.
type screenedIngress struct {
	status StatusValue
	reason string
}

func (b *builder) screenIngress(ing *networkingv1.Ingress, defaults []*networkingv1.IngressClass) screenedIngress {
	if d := b.ingressClass(ing, defaults); !d.ours {
		return screenedIngress{StatusIgnored, d.reason}
	}
	if errs := validateIngress(ing); len(errs) > 0 {
		return screenedIngress{StatusInvalid, notServed(errs)}
	}
	return screenedIngress{}
}

func (p *ingressPlan) claims() []claim {
	out := make([]claim, 0, len(p.routes)+len(p.defaults)+len(p.tls))
	for _, r := range p.routes {
		out = append(out, r.claim)
	}
	for _, r := range p.defaults {
		out = append(out, r.claim)
	}
	for _, t := range p.tls {
		out = append(out, t.claim)
	}
	return out
}

// conflictsOf lists plan's claims that another Ingress already owns, and notes on each
// owner that it won.
func conflictsOf(plan *ingressPlan, owners map[claim]ObjectRef, notes map[ObjectRef][]string) []string {
	var out []string
	for _, c := range plan.claims() {
		owner, taken := owners[c]
		if !taken || owner == plan.ref {
			continue
		}
		out = append(out, fmt.Sprintf("%s is served by Ingress %s/%s", c, owner.Namespace, owner.Name))
		notes[owner] = append(notes[owner], fmt.Sprintf("%s is also claimed by Ingress %s/%s, which was rejected", c, plan.ref.Namespace, plan.ref.Name))
	}
	return out
}

// planIngress turns a well-formed Ingress into the claims and routes it asks for.
func (b *builder) planIngress(ing *networkingv1.Ingress) *ingressPlan {
	plan := &ingressPlan{ref: ObjectRef{Kind: KindIngress, Namespace: ing.Namespace, Name: ing.Name}}
	var notes []string
	plan.timeouts, plan.retry, notes = ingressPolicies(ing)
	plan.warnings = append(plan.warnings, notes...)
	seen := map[claim]pathField{}
	add := func(c claim, be *networkingv1.IngressServiceBackend, field pathField) {
		if prev, dup := seen[c]; dup {
			plan.warnings = append(plan.warnings, fmt.Sprintf("%s repeats %s (%s); the first one is used", field, c, prev))
			return
		}
		seen[c] = field
		plan.routes = append(plan.routes, plannedRoute{claim: c, backend: be})
	}
	claimed := func(c claim) bool { _, ok := seen[c]; return ok }
	var hosts []string
	for i, rule := range ing.Spec.Rules {
		host := ruleHost(rule.Host)
		hosts = append(hosts, host)
		if rule.HTTP == nil {
			continue
		}
		for j, p := range rule.HTTP.Paths {
			add(pathClaim(host, pathTypeOf(p), p.Path), p.Backend.Service, pathField{rule: i, path: j})
		}
	}
	if db := ing.Spec.DefaultBackend; db != nil {
		// The default backend serves requests matching no host (seed 000) and, on the hosts
		// this Ingress has rules for, requests matching no path.
		// A rule of the same Ingress for "/" on a host already serves its unmatched paths.
		if c := defaultClaim(catchAll); !claimed(c) {
			plan.catchAll = &plannedRoute{claim: c, backend: db.Service}
		}
		for _, h := range uniqueSorted(hosts) {
			if c := defaultClaim(h); h != catchAll && !claimed(c) {
				plan.defaults = append(plan.defaults, plannedRoute{claim: c, backend: db.Service})
			}
		}
	}
	b.planTLS(ing, plan, hosts)
	return plan
}

// pathField names an Ingress path, formatted only for a message.
type pathField struct{ rule, path int }

func (f pathField) String() string {
	return fmt.Sprintf("spec.rules[%d].http.paths[%d]", f.rule, f.path)
}

func ruleHost(host string) string {
	if host == "" {
		return catchAll
	}
	return host
}

// pathClaim normalises an Ingress path into a claim. Prefix paths ignore a trailing "/"
// (seed 000: "/abc" and "/abc/" specify the same match). ImplementationSpecific is served
// as Prefix, with an empty path meaning "/".
func pathClaim(host string, pt networkingv1.PathType, path string) claim {
	if pt == networkingv1.PathTypeExact {
		return claim{host: host, kind: claimExact, path: path}
	}
	p := strings.TrimRight(path, "/")
	if p == "" {
		return defaultClaim(host)
	}
	return claim{host: host, kind: claimPrefix, path: p}
}

func defaultClaim(host string) claim { return claim{host: host, kind: claimDefault, path: "/"} }

func uniqueSorted(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// applyIngressPlan adds an accepted Ingress's rule routes and TLS hosts to the graph.
func (b *builder) applyIngressPlan(plan *ingressPlan) {
	for _, r := range plan.routes {
		route := b.ingressRoute(plan, r)
		vh := b.vhost(r.claim.host)
		vh.Routes = append(vh.Routes, route)
	}
	for _, t := range plan.tls {
		b.svhosts[t.claim.host] = &SecureVirtualHost{VirtualHost: VirtualHost{Name: t.claim.host}, Secret: t.secret}
	}
}

func (b *builder) ingressRoute(plan *ingressPlan, r plannedRoute) *Route {
	kind := PathPrefix
	if r.claim.kind == claimExact {
		kind = PathExact
	}
	// Default claims carry the path "/", so they become the prefix "/".
	var pol clusterPolicy
	// As in Contour, the Service's annotation chooses the protocol of its port.
	pol.protocol, _ = b.annotatedProtocolOf(plan.ref.Namespace, r.backend.Name, r.backend.Port)
	if overTLS(pol.protocol) {
		// Contour drops such an Ingress's rules with only a log line; its backend is
		// kept here, reached without a certificate, and the status says why.
		if msg := b.clientCertificateProblem(); msg != "" {
			plan.warnings = append(plan.warnings, fmt.Sprintf("Service %s/%s port %s speaks %s to its backend: %s", plan.ref.Namespace, r.backend.Name, portLabel(r.backend.Port), pol.protocol, msg))
		}
	}
	cluster, warn, annotations := b.serviceCluster(plan.ref.Namespace, r.backend, pol)
	for _, w := range []string{warn, annotations} {
		if w != "" {
			plan.warnings = append(plan.warnings, w)
		}
	}
	// The route, its one destination and the list of it are allocated together: one
	// allocation instead of three, for each of the tens of thousands of routes.
	a := &struct {
		route Route
		wc    WeightedCluster
		wcs   [1]*WeightedCluster
	}{
		route: Route{Path: PathMatch{Kind: kind, Value: r.claim.path}, Source: plan.ref, Timeouts: plan.timeouts, Retry: plan.retry},
		wc:    WeightedCluster{Cluster: cluster, Weight: 1},
	}
	a.wcs[0] = &a.wc
	a.route.Clusters = a.wcs[:]
	if b.opts.DefaultHeaders.ApplyToIngress && cluster != nil {
		b.serviceDefaultHeaders(&a.wc, plan.ref.Namespace, cluster.Service.Name, int(cluster.Port))
	}
	return &a.route
}

// addHostDefaults gives each host its default-backend route, matching every path. It is
// added after all rules; route ordering puts the prefix "/" last anyway.
func (b *builder) addHostDefaults(accepted []*ingressPlan) {
	for _, plan := range accepted {
		defaults := plan.defaults
		if plan.catchAll != nil {
			defaults = append(defaults, *plan.catchAll)
		}
		for _, d := range defaults {
			vh := b.vhost(d.claim.host)
			vh.Routes = append(vh.Routes, b.ingressRoute(plan, d))
		}
	}
}

// copyRoutesToSecureHosts serves each TLS host's routes over HTTPS as well: an Ingress
// rule applies whatever the scheme. A wildcard certificate also reaches the precise
// hosts under it that have no certificate of their own (their clients' SNI selects the
// wildcard): those keep their own routes, never the wildcard's.
func (b *builder) copyRoutesToSecureHosts() {
	for name, svh := range b.svhosts {
		if vh, ok := b.vhosts[name]; ok {
			svh.Routes = append([]*Route(nil), vh.Routes...)
		}
		if !svh.IsWildcard() {
			continue
		}
		for host, vh := range b.vhosts {
			if _, secure := b.svhosts[host]; !secure && coversOneLabel(name, host) {
				svh.Also = append(svh.Also, vh)
			}
		}
		sort.Slice(svh.Also, func(i, j int) bool { return svh.Also[i].Name < svh.Also[j].Name })
	}
}

// coversOneLabel reports whether the wildcard "*.suffix" matches host: exactly one label
// followed by the suffix.
func coversOneLabel(wildcard, host string) bool {
	suffix := wildcard[1:] // ".suffix"
	label, ok := strings.CutSuffix(host, suffix)
	return ok && label != "" && !strings.ContainsAny(label, ".*")
}

func (b *builder) setIngressStatus(plan *ingressPlan, notes []string) {
	if len(plan.errs) > 0 {
		b.setStatus(plan.ref, StatusInvalid, strings.Join(uniqueInOrder(append(plan.errs, plan.warnings...)), "; "))
		return
	}
	desc := "valid Ingress"
	extra := uniqueInOrder(append(plan.warnings, notes...))
	if len(extra) > 0 {
		desc += "; " + strings.Join(extra, "; ")
	}
	b.statuses = append(b.statuses, Status{Object: plan.ref, Status: StatusValid, Description: desc, Noted: len(extra) > 0})
}

// uniqueInOrder drops repeated messages (several routes to one missing Service, say).
func uniqueInOrder(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// rootConflicts lists the hosts of plan that an IngressRoute root at least as old as ing
// owns.
func rootConflicts(ing *networkingv1.Ingress, plan *ingressPlan, rootHosts map[string]hostRoot) []string {
	if len(rootHosts) == 0 {
		return nil // no IngressRoutes: keep the Ingress path free of extra work
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range plan.claims() {
		root := rootHosts[c.host]
		if root == nil || seen[c.host] || ing.CreationTimestamp.Before(root.createdAt()) {
			continue
		}
		seen[c.host] = true
		out = append(out, fmt.Sprintf("host %q belongs to %s, which is not newer than this Ingress", c.host, root.objRef()))
	}
	return out
}
