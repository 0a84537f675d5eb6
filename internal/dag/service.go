package dag

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// serviceCluster resolves a Service backend (in the referring object's namespace) to the
// cluster of one Service port with its ready endpoints. A Service or port that does not
// exist still yields a cluster, with no endpoints, so the route answers 503 until it
// appears; the returned warning says so. annotations says which of the Service's
// annotations are ignored (breakerAnnotationsWarning), a problem of another kind.
func (b *builder) serviceCluster(namespace string, be *networkingv1.IngressServiceBackend, pol clusterPolicy) (c *Cluster, warning, annotations string) {
	key := types.NamespacedName{Namespace: namespace, Name: be.Name}
	svc := b.store.Services[key]
	if svc == nil {
		return b.cluster(key, portLabel(be.Port), nil, nil, pol), fmt.Sprintf("Service %s not found: its routes answer 503 until it exists", key), ""
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if reason := b.externalNameRefused(svc); reason != "" {
			return b.cluster(key, portLabel(be.Port), nil, nil, pol), fmt.Sprintf("Service %s: %s: its routes answer 503", key, reason), ""
		}
	}
	sp, ok := servicePort(svc, be.Port)
	if !ok {
		if svc.Spec.Type == corev1.ServiceTypeExternalName && be.Port.Number != 0 {
			sp = corev1.ServicePort{Port: be.Port.Number}
		} else {
			return b.cluster(key, portLabel(be.Port), nil, nil, pol), fmt.Sprintf("Service %s has no port %s: its routes answer 503; name one of the Service's ports", key, portLabel(be.Port)), ""
		}
	}
	c = b.cluster(key, strconv.Itoa(int(sp.Port)), svc, &sp, pol)
	if c.SkippedEndpoints > 0 {
		warning = fmt.Sprintf("Service %s: %d endpoint addresses ignored (not IP addresses, or ports outside 1-65535)", key, c.SkippedEndpoints)
	}
	return c, warning, breakerAnnotationsWarning(svc)
}

// externalNameRefused says why an ExternalName Service may not be used, or "". Such a
// Service points wherever its author likes, so a team could otherwise reach the proxy's
// own loopback ports (the admin endpoint) or another namespace's Services by their
// cluster DNS names.
func (b *builder) externalNameRefused(svc *corev1.Service) string {
	if !b.opts.AllowExternalName {
		return "ExternalName Services are disabled; enable them with --enable-external-name-services"
	}
	name := strings.ToLower(strings.TrimSuffix(svc.Spec.ExternalName, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return fmt.Sprintf("externalName %q is this machine", svc.Spec.ExternalName)
	}
	// Unmapped: ::ffff:0.0.0.0 is 0.0.0.0, which connects to this machine.
	if ip, err := netip.ParseAddr(name); err == nil && (ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.Unmap().IsUnspecified()) {
		return fmt.Sprintf("externalName %q is a loopback, link-local or unspecified address", svc.Spec.ExternalName)
	}
	for _, zone := range []string{".svc", ".svc.cluster.local"} {
		if rest, ok := strings.CutSuffix(name, zone); ok {
			if parts := strings.Split(rest, "."); len(parts) >= 2 && parts[len(parts)-1] != svc.Namespace {
				return fmt.Sprintf("externalName %q is a Service in another namespace", svc.Spec.ExternalName)
			}
		}
	}
	return ""
}

func portLabel(p networkingv1.ServiceBackendPort) string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(int(p.Number))
}

func servicePort(svc *corev1.Service, p networkingv1.ServiceBackendPort) (corev1.ServicePort, bool) {
	for _, sp := range svc.Spec.Ports {
		if (p.Name != "" && sp.Name == p.Name) || (p.Name == "" && sp.Port == p.Number) {
			return sp, true
		}
	}
	return corev1.ServicePort{}, false
}

// clusterPolicy is how a cluster balances and checks its endpoints. Routes to one Service
// port with different policies need different clusters.
type clusterPolicy struct {
	lb LoadBalancer
	hc *HealthCheck
	// The rest are HTTPProxy's: how to speak to the endpoints and when to eject them.
	protocol   string
	validation *UpstreamValidation
	outlier    *OutlierDetection
	idleConn   *time.Duration
	// healthPort, when not 0, is the Service port health checks go to.
	healthPort int32
	// slowStart, when set, ramps up new endpoints' share.
	slowStart *SlowStart
}

// suffix tells clusters of one Service port apart by policy; the default policy has none,
// so Ingress clusters keep their plain namespace/service/port names.
func (p clusterPolicy) suffix() string {
	if (p.lb == "" || p.lb == LBRoundRobin) && p.hc == nil && p.protocol == "" && p.validation == nil && p.outlier == nil && p.idleConn == nil && p.healthPort == 0 && p.slowStart == nil {
		return ""
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s", p.lb)
	if hc := p.hc; hc != nil {
		fmt.Fprintf(h, "|%q|%q|%d|%d|%d|%d", hc.Path, hc.Host, hc.Interval, hc.Timeout, hc.UnhealthyThreshold, hc.HealthyThreshold)
		if hc.TCP || len(hc.ExpectedStatuses) > 0 {
			fmt.Fprintf(h, "|tcp=%t|%v", hc.TCP, hc.ExpectedStatuses)
		}
	}
	if p.protocol != "" || p.validation != nil || p.outlier != nil || p.idleConn != nil {
		fmt.Fprintf(h, "|proto=%s", p.protocol)
		if v := p.validation; v != nil {
			fmt.Fprintf(h, "|ca=%s|%q", v.CAName, v.SubjectNames)
			if len(v.SubjectURIs) > 0 {
				fmt.Fprintf(h, "|uris=%q", v.SubjectURIs)
			}
			if v.ServerName != "" {
				fmt.Fprintf(h, "|sni=%q", v.ServerName)
			}
		}
		if o := p.outlier; o != nil {
			fmt.Fprintf(h, "|outlier=%v", *o)
		}
		if p.idleConn != nil {
			fmt.Fprintf(h, "|idle=%d", *p.idleConn)
		}
	}
	if p.healthPort != 0 {
		fmt.Fprintf(h, "|healthPort=%d", p.healthPort)
	}
	if s := p.slowStart; s != nil {
		fmt.Fprintf(h, "|slowStart=%d/%g/%g", s.Window, s.Aggression, s.MinWeightPercent)
	}
	return fmt.Sprintf("/%08x", h.Sum32())
}

// cluster returns the cluster for a Service port and policy, creating it on first use so
// that every route to the same port with the same policy shares one cluster.
func (b *builder) cluster(svc types.NamespacedName, port string, s *corev1.Service, sp *corev1.ServicePort, pol clusterPolicy) *Cluster {
	key := clusterKey{svc: svc, port: port, suffix: pol.suffix()}
	if c, ok := b.clusters[key]; ok {
		return c
	}
	c := &Cluster{Name: svc.Namespace + "/" + svc.Name + "/" + port + key.suffix, Service: svc, LoadBalancer: pol.lb, HealthCheck: pol.hc,
		Protocol: pol.protocol, UpstreamValidation: pol.validation, Outlier: pol.outlier, IdleConnectionTimeout: pol.idleConn, SlowStart: pol.slowStart}
	if sp != nil {
		c.Port = sp.Port
		// The name labels the cluster's stats. The API server only stores DNS labels, but
		// a manifest in run mode is not validated: a name it would refuse (not UTF-8, say)
		// is left out, and the stats use the port number.
		if len(isDNS1123Label(sp.Name)) == 0 {
			c.PortName = sp.Name
		}
		c.CircuitBreakers = serviceCircuitBreakers(s)
		if s.Spec.Type == corev1.ServiceTypeExternalName {
			c.ExternalName = s.Spec.ExternalName
		} else {
			c.Endpoints, c.SkippedEndpoints = b.endpoints(svc, sp.Name)
			if pol.healthPort != 0 {
				b.healthPorts(c, s, pol.healthPort)
			}
		}
	}
	b.clusters[key] = c
	return c
}

// healthPorts points the health checks of c's endpoints at the Service's port
// healthPort: each address's port for it, from the same EndpointSlices (or Endpoints).
// An address without one is checked on its serving port.
func (b *builder) healthPorts(c *Cluster, s *corev1.Service, healthPort int32) {
	hp, ok := servicePort(s, networkingv1.ServiceBackendPort{Number: healthPort})
	if !ok {
		return // validated where the policy is made (a warning)
	}
	health, _ := b.endpoints(c.Service, hp.Name)
	byAddr := make(map[string]int32, len(health))
	for _, e := range health {
		byAddr[e.Address] = e.Port
	}
	for i := range c.Endpoints {
		if p, ok := byAddr[c.Endpoints[i].Address]; ok && p != c.Endpoints[i].Port {
			c.Endpoints[i].HealthPort = p
		}
	}
}

// clusterKey is what a cluster's name is made of: routes to the same Service port find
// their cluster without making the name again.
type clusterKey struct {
	svc          types.NamespacedName
	port, suffix string
}

// endpoints returns the ready addresses serving the Service port named portName, from its
// EndpointSlices when it has any, else from its Endpoints object. Endpoint ports are
// matched to Service ports by name, as kube-proxy does. Addresses that are not IPs (FQDN
// slices) and invalid ports are skipped and counted: the data plane connects to IPs only.
func (b *builder) endpoints(svc types.NamespacedName, portName string) ([]Endpoint, int) {
	var out []Endpoint
	skipped := 0
	add := func(addr string, port int32) {
		if ip, err := netip.ParseAddr(addr); err != nil || ip.Zone() != "" || port < 1 || port > 65535 {
			skipped++
			return
		}
		out = append(out, Endpoint{Address: addr, Port: port})
	}
	if ess := b.store.ServiceSlices(svc); len(ess) > 0 {
		for _, es := range ess {
			for _, p := range es.Ports {
				if p.Port == nil || derefString(p.Name) != portName {
					continue
				}
				out = slices.Grow(out, len(es.Endpoints)) // one allocation, not one per doubling
				for _, ep := range es.Endpoints {
					if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
						continue
					}
					for _, addr := range ep.Addresses {
						add(addr, *p.Port)
					}
				}
			}
		}
	} else if eps := b.store.Endpoints[svc]; eps != nil {
		for _, subset := range eps.Subsets {
			for _, p := range subset.Ports {
				if p.Name != portName {
					continue
				}
				out = slices.Grow(out, len(subset.Addresses))
				for _, a := range subset.Addresses {
					add(a.IP, p.Port)
				}
			}
		}
	}
	return sortedUniqueEndpoints(out), skipped
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedUniqueEndpoints(in []Endpoint) []Endpoint {
	slices.SortFunc(in, func(a, b Endpoint) int {
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	out := in[:0]
	for i, e := range in {
		if i == 0 || e != in[i-1] {
			out = append(out, e)
		}
	}
	return out
}
