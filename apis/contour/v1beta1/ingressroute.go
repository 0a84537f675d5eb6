package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// IngressRoute is one document of the routing graph (seed 003): a root when it has a
// virtualhost, otherwise a vertex that serves the path prefix another IngressRoute
// delegates to it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,path=ingressroutes,singular=ingressroute,shortName=ir;irs
// +kubebuilder:printcolumn:name="FQDN",type=string,JSONPath=`.spec.virtualhost.fqdn`
// +kubebuilder:printcolumn:name="TLS Secret",type=string,JSONPath=`.spec.virtualhost.tls.secretName`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.currentStatus`
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.status.description`
type IngressRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IngressRouteSpec `json:"spec"`
	// Status is written by the controller.
	// +optional
	Status Status `json:"status,omitempty"`
}

// IngressRouteList is a list of IngressRoutes.
//
// +kubebuilder:object:root=true
type IngressRouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IngressRoute `json:"items"`
}

// IngressRouteSpec is the routing an IngressRoute asks for.
type IngressRouteSpec struct {
	// VirtualHost makes the object a root: it owns this host name.
	// +optional
	VirtualHost *VirtualHost `json:"virtualhost,omitempty"`
	// Strategy is the load-balancing strategy of every service of this object that does
	// not set its own. Default RoundRobin.
	// +optional
	// +kubebuilder:validation:Enum=RoundRobin;WeightedLeastRequest;RingHash;Maglev;Random
	Strategy string `json:"strategy,omitempty"`
	// HealthCheck is the active health check of every service of this object that does
	// not set its own.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
	// Routes are matched by longest prefix. A vertex's routes must all lie under the
	// prefix delegated to it.
	Routes []Route `json:"routes"`
}

// VirtualHost is the host a root IngressRoute serves.
type VirtualHost struct {
	// Fqdn is the fully qualified host name, without wildcards.
	Fqdn string `json:"fqdn"`
	// Aliases are more host names served with the same routes (and certificate).
	// +optional
	Aliases []string `json:"aliases,omitempty"`
	// TLS serves the host over HTTPS; plain-HTTP requests are redirected to HTTPS
	// unless their route permits insecure requests.
	// +optional
	TLS *TLS `json:"tls,omitempty"`
}

// TLS is the certificate of a virtual host.
type TLS struct {
	// SecretName is a kubernetes.io/tls Secret in the root's namespace, or
	// "namespace/name" of a Secret whose namespace delegates it with a
	// TLSCertificateDelegation.
	SecretName string `json:"secretName"`
	// MinimumProtocolVersion is the oldest TLS version accepted: "1.1" (the default),
	// "1.2" or "1.3".
	// +optional
	// +kubebuilder:validation:Enum="1.1";"1.2";"1.3"
	MinimumProtocolVersion string `json:"minimumProtocolVersion,omitempty"`
}

// Route sends requests whose path starts with Match to services in the object's own
// namespace, or delegates them to another IngressRoute.
type Route struct {
	// Match is the path prefix of the route; it starts with "/".
	Match string `json:"match"`
	// Services receive the traffic, split by weight. The canonical spelling.
	// +optional
	Services []Service `json:"services,omitempty"`
	// Service is the seed's alternative spelling of Services: one service or a list.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	Service ServiceList `json:"service,omitempty"`
	// Delegate hands the prefix to another IngressRoute.
	// +optional
	Delegate *Delegate `json:"delegate,omitempty"`
	// PermitInsecure serves the route over plain HTTP too on a TLS virtual host,
	// instead of redirecting to HTTPS.
	// +optional
	PermitInsecure bool `json:"permitInsecure,omitempty"`
	// PrefixRewrite replaces the matched prefix before the request goes upstream.
	// +optional
	PrefixRewrite string `json:"prefixRewrite,omitempty"`
	// TimeoutPolicy sets the request and idle timeouts of the route (seed 002).
	// +optional
	TimeoutPolicy *TimeoutPolicy `json:"timeoutPolicy,omitempty"`
	// RetryPolicy retries failed requests of the route (seed 002).
	// +optional
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`
}

// AllServices returns the route's services, whichever spelling the manifest used.
func (r *Route) AllServices() []Service {
	if len(r.Service) == 0 {
		return r.Services
	}
	if len(r.Services) == 0 {
		return r.Service
	}
	return append(append([]Service(nil), r.Services...), r.Service...)
}

// Service is a port of a Service in the IngressRoute's namespace.
type Service struct {
	// Name of the Service.
	Name string `json:"name"`
	// Port is the Service's port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// Weight is the service's share of the route's traffic. When no service of the
	// route sets a weight, traffic is split evenly; otherwise an unset weight is 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Weight *int64 `json:"weight,omitempty"`
	// Strategy is the load-balancing strategy across the service's endpoints.
	// +optional
	// +kubebuilder:validation:Enum=RoundRobin;WeightedLeastRequest;RingHash;Maglev;Random
	Strategy string `json:"strategy,omitempty"`
	// HealthCheck actively checks the service's endpoints.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
}

// HealthCheck is an active HTTP health check.
type HealthCheck struct {
	// Path is requested on every endpoint; 200 means healthy, 503 unhealthy at once.
	Path string `json:"path"`
	// Host is the Host header of the checks. Default "contour-envoy-healthcheck".
	// +optional
	Host string `json:"host,omitempty"`
	// IntervalSeconds between checks. Default 5.
	// +optional
	// +kubebuilder:validation:Minimum=0
	IntervalSeconds int64 `json:"intervalSeconds,omitempty"`
	// TimeoutSeconds to wait for an answer. Default 2.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
	// UnhealthyThresholdCount failed checks mark an endpoint unhealthy. Default 3.
	// +optional
	// +kubebuilder:validation:Minimum=0
	UnhealthyThresholdCount int64 `json:"unhealthyThresholdCount,omitempty"`
	// HealthyThresholdCount passed checks mark it healthy again. Default 2.
	// +optional
	// +kubebuilder:validation:Minimum=0
	HealthyThresholdCount int64 `json:"healthyThresholdCount,omitempty"`
}

// Delegate names the IngressRoute a route's prefix is delegated to.
type Delegate struct {
	// Name of the IngressRoute.
	Name string `json:"name"`
	// Namespace of the IngressRoute; default the delegating object's namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// TimeoutPolicy holds a route's timeouts. Values are durations ("1s", "250ms") or
// "infinity"; seed 002's tables say how every other input is treated.
type TimeoutPolicy struct {
	// Request is the time allowed for the whole response, from the end of the request.
	// +optional
	Request *intstr.IntOrString `json:"request,omitempty"`
	// Idle is the time a request may see no activity.
	// +optional
	Idle *intstr.IntOrString `json:"idle,omitempty"`
}

// RetryPolicy retries requests that fail with a listed status code.
type RetryPolicy struct {
	// Count is the maximum number of retries (default 1). The canonical spelling.
	// +optional
	Count *intstr.IntOrString `json:"count,omitempty"`
	// MaxRetries is the seed's alternative spelling of Count.
	// +optional
	MaxRetries *intstr.IntOrString `json:"maxRetries,omitempty"`
	// OnStatusCodes are the status codes retried: "500" to "509", or "50x" for all of
	// them (the default).
	// +optional
	OnStatusCodes []intstr.IntOrString `json:"onStatusCodes,omitempty"`
	// PerTryTimeout bounds each attempt.
	// +optional
	PerTryTimeout *intstr.IntOrString `json:"perTryTimeout,omitempty"`
}

// Status is the controller's verdict on an IngressRoute.
type Status struct {
	// CurrentStatus is "valid", "invalid" or "orphaned".
	// +optional
	CurrentStatus string `json:"currentStatus,omitempty"`
	// Description says why, and what to do about it.
	// +optional
	Description string `json:"description,omitempty"`
}
