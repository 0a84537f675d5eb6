// Package contourclient is a typed REST client for the contour.heptio.com/v1beta1 API
// (IngressRoute and TLSCertificateDelegation). The group has no generated clientset; this
// is the small part of one that the Kubernetes source, the status writer and the tests
// use, plus a discovery check for whether the CRDs are installed at all.
package contourclient

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/apis/contour/v1beta1"
)

// The group's resources, as they appear in URLs, RBAC rules and discovery.
const (
	ResourceIngressRoutes             = "ingressroutes"
	ResourceTLSCertificateDelegations = "tlscertificatedelegations"
)

// NewScheme returns a scheme holding the group's types (and the meta types every group
// registers), for decoding what the API server sends.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		panic(err) // static registration; fails only on a programming error
	}
	return s
}

// RESTConfig returns a copy of cfg set up for the group: its API path and version, JSON,
// and a serializer that never fails on an IngressRoute (see DecodeErrorAnnotation).
func RESTConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	gv := v1beta1.SchemeGroupVersion
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

// NewREST returns a REST client for the group, for cache.NewListWatchFromClient.
func NewREST(cfg *rest.Config) (*rest.RESTClient, error) {
	return rest.RESTClientFor(RESTConfig(cfg))
}

// Client is a typed client of the group.
type Client struct {
	rest rest.Interface
}

// New returns a Client for the API server of cfg.
func New(cfg *rest.Config) (*Client, error) {
	r, err := NewREST(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{rest: r}, nil
}

// REST returns the underlying REST client.
func (c *Client) REST() rest.Interface { return c.rest }

// IngressRoutes returns a client of the IngressRoutes in namespace.
func (c *Client) IngressRoutes(namespace string) Resource[v1beta1.IngressRoute, *v1beta1.IngressRoute] {
	return Resource[v1beta1.IngressRoute, *v1beta1.IngressRoute]{rest: c.rest, namespace: namespace, resource: ResourceIngressRoutes}
}

// TLSCertificateDelegations returns a client of the TLSCertificateDelegations in namespace.
func (c *Client) TLSCertificateDelegations(namespace string) Resource[v1beta1.TLSCertificateDelegation, *v1beta1.TLSCertificateDelegation] {
	return Resource[v1beta1.TLSCertificateDelegation, *v1beta1.TLSCertificateDelegation]{rest: c.rest, namespace: namespace, resource: ResourceTLSCertificateDelegations}
}

// object is a pointer to one of the group's types.
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
