package manifest

// Conversions from the deprecated Ingress API versions (networking.k8s.io/v1beta1
// and extensions/v1beta1, removed from Kubernetes in 1.22 but still common in
// manifests) to networking.k8s.io/v1. They follow the API server's own
// conversion: backend → defaultBackend; serviceName/servicePort →
// service{name, port} where an integer servicePort becomes port.number and a
// string one port.name; resource backends, pathType (ImplementationSpecific
// when unset), ingressClassName, tls, rules and status are carried over.
//
// Every conversion deep-copies: the result shares no memory with its input.

import (
	"encoding/json"
	corev1 "k8s.io/api/core/v1"
	extensionsv1beta1 "k8s.io/api/extensions/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ingressFromNetworkingV1beta1 converts a networking.k8s.io/v1beta1 Ingress.
func ingressFromNetworkingV1beta1(in *networkingv1beta1.Ingress) *networkingv1.Ingress {
	out := &networkingv1.Ingress{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.SetGroupVersionKind(gvkIngress)
	out.Spec.IngressClassName = copyString(in.Spec.IngressClassName)
	if b := in.Spec.Backend; b != nil {
		out.Spec.DefaultBackend = convertBackend(b.ServiceName, b.ServicePort, b.Resource)
	}
	for _, t := range in.Spec.TLS {
		out.Spec.TLS = append(out.Spec.TLS, networkingv1.IngressTLS{
			Hosts:      copyStrings(t.Hosts),
			SecretName: t.SecretName,
		})
	}
	for _, r := range in.Spec.Rules {
		rule := networkingv1.IngressRule{Host: r.Host}
		if r.HTTP != nil {
			rule.HTTP = &networkingv1.HTTPIngressRuleValue{}
			for _, p := range r.HTTP.Paths {
				var pt *string
				if p.PathType != nil {
					s := string(*p.PathType)
					pt = &s
				}
				rule.HTTP.Paths = append(rule.HTTP.Paths, networkingv1.HTTPIngressPath{
					Path:     p.Path,
					PathType: convertPathType(pt),
					Backend:  *convertBackend(p.Backend.ServiceName, p.Backend.ServicePort, p.Backend.Resource),
				})
			}
		}
		out.Spec.Rules = append(out.Spec.Rules, rule)
	}
	for _, lb := range in.Status.LoadBalancer.Ingress {
		ing := networkingv1.IngressLoadBalancerIngress{IP: lb.IP, Hostname: lb.Hostname}
		for _, p := range lb.Ports {
			ing.Ports = append(ing.Ports, networkingv1.IngressPortStatus{
				Port: p.Port, Protocol: p.Protocol, Error: copyString(p.Error),
			})
		}
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, ing)
	}
	return out
}

// ingressFromExtensionsV1beta1 converts an extensions/v1beta1 Ingress. Its schema is
// the same as networking.k8s.io/v1beta1's field for field (the API server round-trips
// the two), so it is carried over through its JSON form and converted as one.
func ingressFromExtensionsV1beta1(in *extensionsv1beta1.Ingress) (*networkingv1.Ingress, error) {
	data, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var same networkingv1beta1.Ingress
	if err := json.Unmarshal(data, &same); err != nil {
		return nil, err
	}
	return ingressFromNetworkingV1beta1(&same), nil
}

// ingressClassFromNetworkingV1beta1 converts a networking.k8s.io/v1beta1
// IngressClass; the two versions have the same fields.
func ingressClassFromNetworkingV1beta1(in *networkingv1beta1.IngressClass) *networkingv1.IngressClass {
	out := &networkingv1.IngressClass{ObjectMeta: *in.ObjectMeta.DeepCopy()}
	out.SetGroupVersionKind(gvkIngressClass)
	out.Spec.Controller = in.Spec.Controller
	if p := in.Spec.Parameters; p != nil {
		out.Spec.Parameters = &networkingv1.IngressClassParametersReference{
			APIGroup:  copyString(p.APIGroup),
			Kind:      p.Kind,
			Name:      p.Name,
			Scope:     copyString(p.Scope),
			Namespace: copyString(p.Namespace),
		}
	}
	return out
}

// convertBackend converts the v1beta1 backend fields (identical in both
// deprecated groups) to a v1 IngressBackend.
func convertBackend(serviceName string, servicePort intstr.IntOrString, resource *corev1.TypedLocalObjectReference) *networkingv1.IngressBackend {
	out := &networkingv1.IngressBackend{}
	// Same condition as the API server: any service field set means a
	// service backend.
	if serviceName != "" || servicePort.Type == intstr.String || servicePort.IntVal != 0 || servicePort.StrVal != "" {
		svc := &networkingv1.IngressServiceBackend{Name: serviceName}
		if servicePort.Type == intstr.String {
			svc.Port.Name = servicePort.StrVal
		} else {
			svc.Port.Number = servicePort.IntVal
		}
		out.Service = svc
	}
	if resource != nil {
		out.Resource = resource.DeepCopy()
	}
	return out
}

// convertPathType returns the v1 path type, ImplementationSpecific when unset.
func convertPathType(pt *string) *networkingv1.PathType {
	v := networkingv1.PathTypeImplementationSpecific
	if pt != nil {
		v = networkingv1.PathType(*pt)
	}
	return &v
}

func copyString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func copyStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}
