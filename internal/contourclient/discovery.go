package contourclient

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
)

// Served says which of the groups' resources the API server serves, that is which CRDs
// are installed (and established).
type Served struct {
	// contour.heptio.com/v1beta1
	IngressRoutes             bool
	TLSCertificateDelegations bool
	// projectcontour.io/v1
	HTTPProxies                      bool
	ProjectTLSCertificateDelegations bool
	// projectcontour.io/v1alpha1
	ExtensionServices bool
}

// Discover asks the API server which of the groups' resources it serves. A group the
// server does not know is not an error: nothing of it is served.
func Discover(d discovery.DiscoveryInterface) (Served, error) {
	var s Served
	old, err := resources(d, v1beta1.SchemeGroupVersion)
	if err != nil {
		return Served{}, err
	}
	s.IngressRoutes, s.TLSCertificateDelegations = old[ResourceIngressRoutes], old[ResourceTLSCertificateDelegations]
	project, err := resources(d, contourv1.SchemeGroupVersion)
	if err != nil {
		return Served{}, err
	}
	s.HTTPProxies, s.ProjectTLSCertificateDelegations = project[ResourceHTTPProxies], project[ResourceTLSCertificateDelegations]
	alpha, err := resources(d, contourv1alpha1.SchemeGroupVersion)
	if err != nil {
		return Served{}, err
	}
	s.ExtensionServices = alpha[ResourceExtensionServices]
	return s, nil
}

// resources returns the names of the resources served in gv.
func resources(d discovery.DiscoveryInterface, gv schema.GroupVersion) (map[string]bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, r := range list.APIResources {
		names[r.Name] = true
	}
	return names, nil
}
