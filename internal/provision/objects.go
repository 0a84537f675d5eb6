// Package provision gives each Gateway API Gateway of Portico's classes a data plane of
// its own in the cluster, as a platform team would deploy one by hand: a Deployment of
// proxies that serve that Gateway's listeners and no others (the xDS server narrows what
// each data plane is sent by the Gateway it names, see internal/xds/server's scope.go),
// and a Service that exposes the listener ports, both named after the Gateway, in
// Portico's own namespace (where the xDS client certificate's Secret is; a Secret cannot
// be mounted from another namespace). A Gateway's address is its Service's.
//
// Two Gateways never share a socket: each may listen on port 80. The objects are
// built here as pure functions of the Gateway and the Options (objects.go), applied and
// cleaned up by the Provisioner (provisioner.go), and read back for the Gateway's status
// addresses (addresses.go).
package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// DataPlane is the proxy a Gateway's Deployment runs.
type DataPlane string

const (
	// DataPlaneEnvoy runs Envoy, with the bootstrap `portico bootstrap --gateway` writes.
	DataPlaneEnvoy DataPlane = "envoy"
	// DataPlanePortico runs the embedded proxy, `portico proxy --gateway`.
	DataPlanePortico DataPlane = "portico"
)

// Options say how data planes are deployed.
type Options struct {
	// Namespace is where the Deployments and Services are created: Portico's own.
	Namespace string
	DataPlane DataPlane
	// PorticoImage runs `portico bootstrap` (Envoy's init container) or `portico proxy`.
	PorticoImage string
	EnvoyImage   string
	// XDSAddress is the host:port at which data planes reach the xDS server.
	XDSAddress string
	// XDSServerName is the name the xDS server's certificate must carry, when it is not
	// XDSAddress's host (an IP address, say); "" checks XDSAddress's host.
	XDSServerName string
	// XDSClientSecret is the Secret (in Namespace) holding the client certificate the data
	// planes present to the xDS server (tls.crt, tls.key, ca.crt); "" connects in
	// plaintext, for clusters where the xDS server allows it (--xds-insecure).
	XDSClientSecret string
	// ServiceType of the Gateways' Services (default LoadBalancer).
	ServiceType corev1.ServiceType
	// Replicas of each Deployment (default 2: a Gateway survives a node's loss).
	Replicas int32
}

func (o Options) withDefaults() Options {
	if o.DataPlane == "" {
		o.DataPlane = DataPlaneEnvoy
	}
	if o.ServiceType == "" {
		o.ServiceType = corev1.ServiceTypeLoadBalancer
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	return o
}

// Labels on every object the provisioner makes; the last two name the Gateway served.
const (
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	managedBy             = "portico"
	LabelComponent        = "app.kubernetes.io/component"
	componentGateway      = "gateway-data-plane"
	LabelGatewayNamespace = "portico.dev/gateway-namespace"
	LabelGatewayName      = "portico.dev/gateway-name"
)

// Name is the name of the Deployment and the Service of Gateway gw's data plane:
// "gateway-<namespace>-<name>-<hash>", shortened to fit a DNS label. The hash of the full
// namespace/name keeps "a-b"/"c" and "a"/"b-c" apart, and names cut short distinct.
func Name(gw types.NamespacedName) string {
	sum := sha256.Sum256([]byte(gw.Namespace + "/" + gw.Name))
	hash := hex.EncodeToString(sum[:])[:8]
	base := "gateway-" + gw.Namespace + "-" + gw.Name
	const maxBase = 63 - 1 - 8
	if len(base) > maxBase {
		base = strings.TrimRight(base[:maxBase], "-.")
	}
	return base + "-" + hash
}

func dataPlaneLabels(gw types.NamespacedName) map[string]string {
	return map[string]string{
		LabelManagedBy:        managedBy,
		LabelComponent:        componentGateway,
		LabelGatewayNamespace: gw.Namespace,
		// Label values are at most 63 characters, as Gateway names may not be.
		LabelGatewayName: labelValue(gw.Name),
	}
}

// labelValue is name if it fits a label value, else its first 54 characters and a hash.
func labelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:54], "-.") + "-" + hex.EncodeToString(sum[:])[:8]
}

// selector picks the pods of gw's data plane.
func selector(gw types.NamespacedName) map[string]string {
	return map[string]string{LabelComponent: componentGateway, "portico.dev/data-plane": Name(gw)}
}

// ListenerPorts are the distinct ports of gw's listeners, ascending.
func ListenerPorts(gw *gatewayv1.Gateway) []int32 {
	var ports []int32
	for _, l := range gw.Spec.Listeners {
		ports = append(ports, l.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

func key(gw *gatewayv1.Gateway) types.NamespacedName {
	return types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
}

// Service exposes gw's listener ports.
func Service(gw *gatewayv1.Gateway, o Options) *corev1.Service {
	o = o.withDefaults()
	nn := key(gw)
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: Name(nn), Namespace: o.Namespace, Labels: dataPlaneLabels(nn)},
		Spec: corev1.ServiceSpec{
			Type:     o.ServiceType,
			Selector: selector(nn),
		},
	}
	for _, p := range ListenerPorts(gw) {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: "port-" + strconv.Itoa(int(p)), Protocol: corev1.ProtocolTCP,
			Port: p, TargetPort: intstr.FromInt32(p),
		})
	}
	if o.ServiceType == corev1.ServiceTypeLoadBalancer {
		// Clients' addresses reach the proxies, and no node forwards to another's.
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return svc
}

// Deployment runs gw's data plane.
func Deployment(gw *gatewayv1.Gateway, o Options) *appsv1.Deployment {
	o = o.withDefaults()
	nn := key(gw)
	podLabels := dataPlaneLabels(nn)
	for k, v := range selector(nn) {
		podLabels[k] = v
	}
	spec := podSpec(gw, o)
	replicas := o.Replicas
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: Name(nn), Namespace: o.Namespace, Labels: dataPlaneLabels(nn)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector(nn)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       spec,
			},
		},
	}
}

func podSpec(gw *gatewayv1.Gateway, o Options) corev1.PodSpec {
	nn := key(gw)
	falseV, trueV := false, true
	user := int64(65532)
	spec := corev1.PodSpec{
		// Proxies never talk to the API server.
		AutomountServiceAccountToken:  &falseV,
		TerminationGracePeriodSeconds: ptr(int64(30)),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot: &trueV, RunAsUser: &user, RunAsGroup: &user, FSGroup: &user,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			// Listeners on ports below 1024 (80, 443) bind without any capability: a
			// namespaced sysctl that Pod Security's baseline level allows.
			Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
		},
		Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
	var tlsArgs []string
	var certMounts []corev1.VolumeMount
	if o.XDSClientSecret != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "xds-client-cert", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: o.XDSClientSecret, DefaultMode: ptr(int32(0o440))},
		}})
		certMounts = []corev1.VolumeMount{{Name: "xds-client-cert", MountPath: "/certs", ReadOnly: true}}
		tlsArgs = []string{"--xds-tls-cert-file", "/certs/tls.crt", "--xds-tls-key-file", "/certs/tls.key", "--xds-tls-ca-file", "/certs/ca.crt"}
		if o.XDSServerName != "" {
			tlsArgs = append(tlsArgs, "--xds-tls-server-name", o.XDSServerName)
		}
	}
	gateway := nn.Namespace + "/" + nn.Name
	env := []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	ports := containerPorts(gw)
	var probe *corev1.Probe
	if len(ports) > 0 {
		// Ready once the first listener is open, which is once the first configuration
		// for this Gateway has arrived.
		probe = &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(ports[0].ContainerPort)}},
			PeriodSeconds:    2,
			FailureThreshold: 2,
		}
	}
	switch o.DataPlane {
	case DataPlanePortico:
		args := append([]string{"proxy", "--xds-server", o.XDSAddress, "--gateway", gateway, "--node-id", "$(POD_NAME)"}, tlsArgs...)
		spec.Containers = []corev1.Container{{
			Name: "proxy", Image: o.PorticoImage, Command: []string{"portico"}, Args: args, Env: env,
			Ports: ports, ReadinessProbe: probe, SecurityContext: containerSecurity(),
			Resources:    resources("100m", "64Mi", "512Mi"),
			VolumeMounts: append([]corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}, certMounts...),
		}}
	default:
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		args := append([]string{"bootstrap", "/config/envoy.json", "--xds-address", o.XDSAddress, "--gateway", gateway, "--node-id", "$(POD_NAME)"}, tlsArgs...)
		spec.InitContainers = []corev1.Container{{
			Name: "bootstrap", Image: o.PorticoImage, Command: []string{"portico"}, Args: args, Env: env,
			SecurityContext: containerSecurity(), Resources: resources("10m", "16Mi", "64Mi"),
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}},
		}}
		spec.Containers = []corev1.Container{{
			Name: "envoy", Image: o.EnvoyImage, Command: []string{"envoy"},
			Args:  []string{"-c", "/config/envoy.json", "--log-level", "info"},
			Ports: ports, ReadinessProbe: probe, SecurityContext: containerSecurity(),
			Resources: resources("100m", "128Mi", "1Gi"),
			VolumeMounts: append([]corev1.VolumeMount{
				{Name: "config", MountPath: "/config", ReadOnly: true},
				{Name: "tmp", MountPath: "/tmp"},
			}, certMounts...),
		}}
	}
	return spec
}

func containerPorts(gw *gatewayv1.Gateway) []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, p := range ListenerPorts(gw) {
		out = append(out, corev1.ContainerPort{Name: fmt.Sprintf("port-%d", p), ContainerPort: p, Protocol: corev1.ProtocolTCP})
	}
	return out
}

func containerSecurity() *corev1.SecurityContext {
	falseV, trueV := false, true
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: &falseV, ReadOnlyRootFilesystem: &trueV, RunAsNonRoot: &trueV,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

func resources(cpu, memory, limit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
	}
}

func ptr[T any](v T) *T { return &v }
