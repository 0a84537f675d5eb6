package dag

import (
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// serviceCluster resolves a Service backend (in the referring object's namespace) to the
// cluster of one Service port with its ready endpoints. A Service or port that does not
// exist still yields a cluster, with no endpoints, so the route answers 503 until it
// appears; the returned warning says so.
func (b *builder) serviceCluster(namespace string, be *networkingv1.IngressServiceBackend) (*Cluster, string) {
	key := types.NamespacedName{Namespace: namespace, Name: be.Name}
	svc := b.store.Services[key]
	if svc == nil {
		return b.cluster(key, portLabel(be.Port), nil, nil), fmt.Sprintf("Service %s not found: its routes answer 503 until it exists", key)
	}
	sp, ok := servicePort(svc, be.Port)
	if !ok {
		if svc.Spec.Type == corev1.ServiceTypeExternalName && be.Port.Number != 0 {
			sp = corev1.ServicePort{Port: be.Port.Number}
		} else {
			return b.cluster(key, portLabel(be.Port), nil, nil), fmt.Sprintf("Service %s has no port %s: its routes answer 503; name one of the Service's ports", key, portLabel(be.Port))
		}
	}
	return b.cluster(key, strconv.Itoa(int(sp.Port)), svc, &sp), ""
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

// cluster returns the cluster for a Service port, creating it on first use so that every
// route to the same port shares one cluster.
func (b *builder) cluster(svc types.NamespacedName, port string, s *corev1.Service, sp *corev1.ServicePort) *Cluster {
	name := svc.Namespace + "/" + svc.Name + "/" + port
	if c, ok := b.clusters[name]; ok {
		return c
	}
	c := &Cluster{Name: name, Service: svc}
	if sp != nil {
		c.Port, c.PortName = sp.Port, sp.Name
		if s.Spec.Type == corev1.ServiceTypeExternalName {
			c.ExternalName = s.Spec.ExternalName
		} else {
			c.Endpoints = b.endpoints(svc, sp.Name)
		}
	}
	b.clusters[name] = c
	return c
}

// endpoints returns the ready addresses serving the Service port named portName, from its
// EndpointSlices when it has any, else from its Endpoints object. Endpoint ports are
// matched to Service ports by name, as kube-proxy does.
func (b *builder) endpoints(svc types.NamespacedName, portName string) []Endpoint {
	var out []Endpoint
	if slices := b.store.ServiceSlices(svc); len(slices) > 0 {
		for _, es := range slices {
			for _, p := range es.Ports {
				if p.Port == nil || derefString(p.Name) != portName {
					continue
				}
				for _, ep := range es.Endpoints {
					if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
						continue
					}
					for _, addr := range ep.Addresses {
						out = append(out, Endpoint{Address: addr, Port: *p.Port})
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
				for _, a := range subset.Addresses {
					out = append(out, Endpoint{Address: a.IP, Port: p.Port})
				}
			}
		}
	}
	return sortedUniqueEndpoints(out)
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedUniqueEndpoints(in []Endpoint) []Endpoint {
	sort.Slice(in, func(i, j int) bool {
		if in[i].Address != in[j].Address {
			return in[i].Address < in[j].Address
		}
		return in[i].Port < in[j].Port
	})
	out := in[:0]
	for i, e := range in {
		if i == 0 || e != in[i-1] {
			out = append(out, e)
		}
	}
	return out
}
