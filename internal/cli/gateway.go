package cli

import (
	"flag"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/provision"
	"github.com/portico-dev/portico/internal/version"
)

// DefaultEnvoyImage is the Envoy that Gateways' data planes run, as deploy/envoy.yaml's.
const DefaultEnvoyImage = "envoyproxy/envoy:v1.36.0"

// gatewayDataPlaneFlags defines serve's flags for the Gateways' data planes; the function
// it returns checks them once parsed.
func gatewayDataPlaneFlags(fs *flag.FlagSet, o *provision.Options) func() error {
	plane := fs.String("gateway-data-plane", "envoy", "what each Gateway API Gateway's own data plane runs: envoy, portico (the embedded proxy), or none (deploy them yourself with portico bootstrap --gateway)")
	fs.StringVar(&o.Namespace, "gateway-namespace", app.DefaultGatewayNamespace, "namespace of the Gateways' data planes (their Deployments and Services, and a copy of the client certificate Secret of --managed-certificates)")
	fs.StringVar(&o.EnvoyImage, "gateway-envoy-image", DefaultEnvoyImage, "Envoy image of the Gateways' data planes")
	fs.StringVar(&o.PorticoImage, "gateway-portico-image", "ghcr.io/portico-dev/portico:"+version.Version(), "Portico image of the Gateways' data planes (Envoy's bootstrap, or the embedded proxy)")
	serviceType := fs.String("gateway-service-type", string(corev1.ServiceTypeLoadBalancer), "type of each Gateway's Service: LoadBalancer, NodePort or ClusterIP")
	replicas := fs.Int("gateway-replicas", 2, "proxies per Gateway")
	fs.StringVar(&o.XDSAddress, "gateway-xds-address", "", "host:port at which Gateways' data planes reach the xDS server (default: the first --xds-server-names name and --xds-addr's port)")
	return func() error {
		switch provision.DataPlane(*plane) {
		case provision.DataPlaneEnvoy, provision.DataPlanePortico:
			o.DataPlane = provision.DataPlane(*plane)
		case "none":
			o.DataPlane = ""
		default:
			return fmt.Errorf("--gateway-data-plane %q: use envoy, portico or none", *plane)
		}
		switch t := corev1.ServiceType(*serviceType); t {
		case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort, corev1.ServiceTypeClusterIP:
			o.ServiceType = t
		default:
			return fmt.Errorf("--gateway-service-type %q: use LoadBalancer, NodePort or ClusterIP", *serviceType)
		}
		if *replicas < 1 || *replicas > 1000 {
			return fmt.Errorf("--gateway-replicas %d: use 1 to 1000", *replicas)
		}
		o.Replicas = int32(*replicas)
		return nil
	}
}
