package manifest

// The API server defaults that matter to Portico. Objects read from manifests
// never go through an API server, so these are applied here to make them look
// like what an informer would deliver for the same manifest.

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func defaultIngress(in *networkingv1.Ingress) {
	for i := range in.Spec.Rules {
		http := in.Spec.Rules[i].HTTP
		if http == nil {
			continue
		}
		for j := range http.Paths {
			if http.Paths[j].PathType == nil {
				pt := networkingv1.PathTypeImplementationSpecific
				http.Paths[j].PathType = &pt
			}
		}
	}
}

func defaultIngressClass(in *networkingv1.IngressClass) {
	if p := in.Spec.Parameters; p != nil && p.Scope == nil {
		scope := networkingv1.IngressClassParametersReferenceScopeCluster
		p.Scope = &scope
	}
}

func defaultService(in *corev1.Service) {
	if in.Spec.Type == "" {
		in.Spec.Type = corev1.ServiceTypeClusterIP
	}
	if in.Spec.SessionAffinity == "" {
		in.Spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	for i := range in.Spec.Ports {
		p := &in.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		// targetPort defaults to port.
		if (p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0) ||
			(p.TargetPort.Type == intstr.String && p.TargetPort.StrVal == "") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
}

func defaultEndpoints(in *corev1.Endpoints) {
	for i := range in.Subsets {
		for j := range in.Subsets[i].Ports {
			if in.Subsets[i].Ports[j].Protocol == "" {
				in.Subsets[i].Ports[j].Protocol = corev1.ProtocolTCP
			}
		}
	}
}

func defaultEndpointSlice(in *discoveryv1.EndpointSlice) {
	for i := range in.Ports {
		p := &in.Ports[i]
		if p.Name == nil {
			name := ""
			p.Name = &name
		}
		if p.Protocol == nil {
			proto := corev1.ProtocolTCP
			p.Protocol = &proto
		}
	}
}

// defaultSecret merges stringData into data, as the API server does on
// write (stringData wins over data for the same key, and is then dropped),
// and defaults the type to Opaque.
func defaultSecret(in *corev1.Secret) {
	if len(in.StringData) > 0 {
		if in.Data == nil {
			in.Data = make(map[string][]byte, len(in.StringData))
		}
		for k, v := range in.StringData {
			in.Data[k] = []byte(v)
		}
	}
	in.StringData = nil
	if in.Type == "" {
		in.Type = corev1.SecretTypeOpaque
	}
}
