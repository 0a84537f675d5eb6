package contourclient

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
)

// Served says which of the group's resources the API server serves, that is which CRDs
// are installed (and established).
type Served struct {
	IngressRoutes             bool
	TLSCertificateDelegations bool
}

// Discover asks the API server which of the group's resources it serves. A group the
// server does not know is not an error: nothing is served.
func Discover(d discovery.DiscoveryInterface) (Served, error) {
	list, err := d.ServerResourcesForGroupVersion(v1beta1.SchemeGroupVersion.String())
	if apierrors.IsNotFound(err) {
		return Served{}, nil
	}
	if err != nil {
		return Served{}, err
	}
	var s Served
	for _, r := range list.APIResources {
		switch r.Name {
		case ResourceIngressRoutes:
			s.IngressRoutes = true
		case ResourceTLSCertificateDelegations:
			s.TLSCertificateDelegations = true
		}
	}
	return s, nil
}
