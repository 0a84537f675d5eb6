package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// ExtensionProtocolVersion is the version of the protocol an extension speaks.
type ExtensionProtocolVersion string

// SupportProtocolVersion3 is Envoy's v3 API, the only version served.
const SupportProtocolVersion3 ExtensionProtocolVersion = "v3"

// ExtensionServiceTarget is one Service, in the ExtensionService's own namespace, whose
// endpoints serve the extension.
type ExtensionServiceTarget struct {
	// Name of the Service.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Port of the Service.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	// +kubebuilder:validation:ExclusiveMinimum=false
	// +kubebuilder:validation:ExclusiveMaximum=true
	Port int `json:"port"`
	// Weight is the Service's share of the calls, relative to the other targets'.
	// +optional
	Weight uint32 `json:"weight,omitempty"`
}

// ExtensionServiceSpec says where the extension runs and how to speak to it.
type ExtensionServiceSpec struct {
	// Services serve the extension; calls are spread over all their endpoints.
	// +kubebuilder:validation:MinItems=1
	Services []ExtensionServiceTarget `json:"services"`
	// UpstreamValidation verifies the extension's certificate; it needs protocol h2.
	// +optional
	UpstreamValidation *contourv1.UpstreamValidation `json:"validation,omitempty"`
	// Protocol is how the proxy speaks to the extension: "h2" (HTTP/2 over TLS,
	// the default), "h2c" (HTTP/2 in clear text) or "http/1.1" (in clear text). A
	// gRPC extension speaks h2 or h2c; an HTTP authorization server (serviceType
	// http) any of the three.
	// +optional
	// +kubebuilder:validation:Enum=http/1.1;h2;h2c
	Protocol *string `json:"protocol,omitempty"`
	// LoadBalancerPolicy chooses among the endpoints; Cookie and RequestHash do not
	// apply to extension calls and are ignored, with a warning.
	// +optional
	LoadBalancerPolicy *contourv1.LoadBalancerPolicy `json:"loadBalancerPolicy,omitempty"`
	// TimeoutPolicy.Response bounds each call when the HTTPProxy sets no
	// responseTimeout; Idle does not apply to extension calls and is ignored, with a
	// warning.
	// +optional
	TimeoutPolicy *contourv1.TimeoutPolicy `json:"timeoutPolicy,omitempty"`
	// ProtocolVersion is the version of the extension's protocol: v3.
	// +optional
	// +kubebuilder:validation:Enum=v3
	ProtocolVersion ExtensionProtocolVersion `json:"protocolVersion,omitempty"`
}

// ExtensionServiceStatus is what the controller found of the ExtensionService.
type ExtensionServiceStatus struct {
	// Conditions: "Valid" says whether the extension can be used, with the errors and
	// warnings behind it.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []contourv1.DetailedCondition `json:"conditions,omitempty"`
}

// ExtensionService is a service the proxy calls on its own behalf, such as an external
// authorization server. It becomes one upstream cluster of the proxy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=extensionservice;extensionservices
type ExtensionService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ExtensionServiceSpec `json:"spec,omitempty"`
	// +optional
	Status ExtensionServiceStatus `json:"status,omitempty"`
}

// ExtensionServiceList is a list of ExtensionServices.
//
// +kubebuilder:object:root=true
type ExtensionServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExtensionService `json:"items"`
}
