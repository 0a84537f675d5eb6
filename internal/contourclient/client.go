// Package contourclient is a typed REST client for Contour's two API groups:
// contour.heptio.com/v1beta1 (IngressRoute and TLSCertificateDelegation) and
// projectcontour.io/v1 (HTTPProxy and TLSCertificateDelegation). Neither group has a
// generated clientset; this is the small part of one that the Kubernetes source, the
// status writers and the tests use, plus a discovery check for which of the CRDs are
// installed at all.
package contourclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
)

// The groups' resources, as they appear in URLs, RBAC rules and discovery.
const (
	ResourceIngressRoutes = "ingressroutes"
	ResourceHTTPProxies   = "httpproxies"
	// ResourceTLSCertificateDelegations is the resource of both groups'
	// TLSCertificateDelegations.
	ResourceTLSCertificateDelegations = "tlscertificatedelegations"
	// ResourceExtensionServices is projectcontour.io/v1alpha1's ExtensionServices.
	ResourceExtensionServices = "extensionservices"
)

// NewScheme returns a scheme holding both groups' types (and the meta types every group
// registers), for decoding what the API server sends.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1beta1.AddToScheme, contourv1.AddToScheme, contourv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // static registration; fails only on a programming error
		}
	}
	return s
}

// RESTConfig returns a copy of cfg set up for contour.heptio.com/v1beta1: its API path
// and version, JSON, and a serializer that never fails on an IngressRoute (see
// DecodeErrorAnnotation).
func RESTConfig(cfg *rest.Config) *rest.Config {
	return restConfig(cfg, v1beta1.SchemeGroupVersion)
}

// ProjectRESTConfig is RESTConfig for projectcontour.io/v1, whose serializer never
// fails on an HTTPProxy.
func ProjectRESTConfig(cfg *rest.Config) *rest.Config {
	return restConfig(cfg, contourv1.SchemeGroupVersion)
}

// ExtensionRESTConfig is RESTConfig for projectcontour.io/v1alpha1 (ExtensionService).
func ExtensionRESTConfig(cfg *rest.Config) *rest.Config {
	return restConfig(cfg, contourv1alpha1.SchemeGroupVersion)
}

func restConfig(cfg *rest.Config, gv schema.GroupVersion) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = tolerantSerializer{serializer.NewCodecFactory(NewScheme()).WithoutConversion()}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return c
}

// NewREST returns a REST client for contour.heptio.com/v1beta1, for
// cache.NewListWatchFromClient.
func NewREST(cfg *rest.Config) (*rest.RESTClient, error) {
	return rest.RESTClientFor(RESTConfig(cfg))
}

// NewProjectREST returns a REST client for projectcontour.io/v1.
func NewProjectREST(cfg *rest.Config) (*rest.RESTClient, error) {
	return rest.RESTClientFor(ProjectRESTConfig(cfg))
}

// Client is a typed client of both groups.
type Client struct {
	rest      rest.Interface // contour.heptio.com/v1beta1
	project   rest.Interface // projectcontour.io/v1
	extension rest.Interface // projectcontour.io/v1alpha1
}

// New returns a Client for the API server of cfg.
func New(cfg *rest.Config) (*Client, error) {
	r, err := NewREST(cfg)
	if err != nil {
		return nil, err
	}
	p, err := NewProjectREST(cfg)
	if err != nil {
		return nil, err
	}
	x, err := rest.RESTClientFor(ExtensionRESTConfig(cfg))
	if err != nil {
		return nil, err
	}
	return &Client{rest: r, project: p, extension: x}, nil
}

// ExtensionREST returns the REST client of projectcontour.io/v1alpha1.
func (c *Client) ExtensionREST() rest.Interface { return c.extension }

// ExtensionServices returns a client of the ExtensionServices in namespace. Its
// UpdateStatus and Patch(..., "status") write the status subresource.
func (c *Client) ExtensionServices(namespace string) Resource[contourv1alpha1.ExtensionService, *contourv1alpha1.ExtensionService] {
	return Resource[contourv1alpha1.ExtensionService, *contourv1alpha1.ExtensionService]{rest: c.extension, namespace: namespace, resource: ResourceExtensionServices}
}

// REST returns the REST client of contour.heptio.com/v1beta1.
func (c *Client) REST() rest.Interface { return c.rest }

// ProjectREST returns the REST client of projectcontour.io/v1.
func (c *Client) ProjectREST() rest.Interface { return c.project }

// IngressRoutes returns a client of the IngressRoutes in namespace.
func (c *Client) IngressRoutes(namespace string) Resource[v1beta1.IngressRoute, *v1beta1.IngressRoute] {
	return Resource[v1beta1.IngressRoute, *v1beta1.IngressRoute]{rest: c.rest, namespace: namespace, resource: ResourceIngressRoutes}
}

// TLSCertificateDelegations returns a client of the TLSCertificateDelegations in namespace.
func (c *Client) TLSCertificateDelegations(namespace string) Resource[v1beta1.TLSCertificateDelegation, *v1beta1.TLSCertificateDelegation] {
	return Resource[v1beta1.TLSCertificateDelegation, *v1beta1.TLSCertificateDelegation]{rest: c.rest, namespace: namespace, resource: ResourceTLSCertificateDelegations}
}

// HTTPProxies returns a client of the HTTPProxies in namespace. Its UpdateStatus and
// Patch(..., "status") write the status subresource.
func (c *Client) HTTPProxies(namespace string) Resource[contourv1.HTTPProxy, *contourv1.HTTPProxy] {
	return Resource[contourv1.HTTPProxy, *contourv1.HTTPProxy]{rest: c.project, namespace: namespace, resource: ResourceHTTPProxies}
}

// ProjectTLSCertificateDelegations returns a client of the projectcontour.io/v1
// TLSCertificateDelegations in namespace.
func (c *Client) ProjectTLSCertificateDelegations(namespace string) Resource[contourv1.TLSCertificateDelegation, *contourv1.TLSCertificateDelegation] {
	return Resource[contourv1.TLSCertificateDelegation, *contourv1.TLSCertificateDelegation]{rest: c.project, namespace: namespace, resource: ResourceTLSCertificateDelegations}
}

// object is a pointer to one of the groups' types.
type object[T any] interface {
	*T
	runtime.Object
	GetName() string
}

// Resource is the client of one resource in one namespace. T is the object type, PT
// its pointer.
type Resource[T any, PT object[T]] struct {
	rest      rest.Interface
	namespace string
	resource  string
}

func (r Resource[T, PT]) request(verb string) *rest.Request {
	return r.rest.Verb(verb).Namespace(r.namespace).Resource(r.resource)
}

func into[T any, PT object[T]](res rest.Result) (PT, error) {
	out := PT(new(T))
	if err := res.Into(out); err != nil {
		return nil, err
	}
	return out, nil
}

// Get returns the object called name.
func (r Resource[T, PT]) Get(ctx context.Context, name string, opts metav1.GetOptions) (PT, error) {
	return into[T, PT](r.request("GET").Name(name).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx))
}

// Create creates obj and returns it as the API server stored it.
func (r Resource[T, PT]) Create(ctx context.Context, obj PT, opts metav1.CreateOptions) (PT, error) {
	return into[T, PT](r.request("POST").VersionedParams(&opts, metav1.ParameterCodec).Body(obj).Do(ctx))
}

// Update replaces obj (its spec and metadata; the status subresource ignores them).
func (r Resource[T, PT]) Update(ctx context.Context, obj PT, opts metav1.UpdateOptions) (PT, error) {
	return into[T, PT](r.request("PUT").Name(obj.GetName()).VersionedParams(&opts, metav1.ParameterCodec).Body(obj).Do(ctx))
}

// UpdateStatus replaces obj's status through the status subresource.
func (r Resource[T, PT]) UpdateStatus(ctx context.Context, obj PT, opts metav1.UpdateOptions) (PT, error) {
	return into[T, PT](r.request("PUT").Name(obj.GetName()).SubResource("status").VersionedParams(&opts, metav1.ParameterCodec).Body(obj).Do(ctx))
}

// Patch applies a patch to the object called name, or to one of its subresources.
func (r Resource[T, PT]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (PT, error) {
	return into[T, PT](r.rest.Patch(pt).Namespace(r.namespace).Resource(r.resource).Name(name).SubResource(subresources...).
		VersionedParams(&opts, metav1.ParameterCodec).Body(data).Do(ctx))
}

// Delete deletes the object called name.
func (r Resource[T, PT]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.request("DELETE").Name(name).Body(&opts).Do(ctx).Error()
}
