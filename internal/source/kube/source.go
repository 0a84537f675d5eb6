// Package kube is the Kubernetes source: client-go shared informers for every kind that
// routing depends on (contour.heptio.com IngressRoutes, projectcontour.io HTTPProxies and
// both groups' TLSCertificateDelegations, and the gateway.networking.k8s.io kinds
// included, when their CRDs are installed),
// feeding one store, and a signal that coalesces bursts of events into a few rebuilds.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/store"
)

// FieldManager is the name Portico's writes are recorded under in managedFields.
const FieldManager = "portico"

// Config configures a Source.
type Config struct {
	Client kubernetes.Interface
	// Contour reads IngressRoutes, HTTPProxies and TLSCertificateDelegations. When nil,
	// or for the kinds the API server does not serve (their CRDs are not installed),
	// they are not watched.
	Contour *contourclient.Client
	// Gateway reads the Gateway API kinds. When nil, or for the kinds the API server does
	// not serve (their CRDs are not installed), they are not watched.
	Gateway gatewayclient.Interface
	// Namespaces restricts the namespaced kinds to these namespaces; empty means all.
	Namespaces []string
	Logger     *slog.Logger
}

// Source mirrors the cluster's routing objects into a store.
type Source struct {
	cfg Config
	// handlers are the event handler registrations; their HasSynced is true only once
	// the handler has received the initial list, which the informer's own sync is not.
	handlers []cache.ResourceEventHandlerRegistration
	// informers are the ones no factory starts (Contour's kinds).
	informers []cache.SharedIndexInformer
	mu        sync.Mutex
	store     *store.Store
	changes   chan struct{}
	synced    bool
}

// New returns a Source; nothing is watched until Run.
func New(cfg Config) *Source {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: cfg, store: store.New(), changes: make(chan struct{}, 1)}
}

// Changes receives a value after the store changes. Several changes in a row may be
// delivered as one; receivers take a Snapshot after receiving.
func (s *Source) Changes() <-chan struct{} { return s.changes }

// Snapshot returns a copy of the store that later events do not change. The objects
// themselves are shared: informers never mutate an object they have handed out.
func (s *Source) Snapshot() *store.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.store.Clone()
}

// Synced reports whether every informer has completed its initial list.
func (s *Source) Synced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

// Run starts the informers, waits for their caches to fill, signals one change, and
// keeps mirroring until ctx is done.
func (s *Source) Run(ctx context.Context) error {
	var factories []informers.SharedInformerFactory
	var gatewayFactories []gatewayinformers.SharedInformerFactory
	namespaces := s.cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{corev1.NamespaceAll}
	}
	served, err := s.discoverContour(ctx)
	if err != nil {
		return nil // ctx ended while the API server could not be reached
	}
	gwServed, err := s.discoverGatewayAPI(ctx)
	if err != nil {
		return nil
	}
	for _, ns := range namespaces {
		s.registerContour(served, ns)
		if f := s.registerGatewayAPI(gwServed, ns); f != nil {
			gatewayFactories = append(gatewayFactories, f)
		}
		f := informers.NewSharedInformerFactoryWithOptions(s.cfg.Client, 0,
			informers.WithNamespace(ns), informers.WithTransform(trimObject))
		s.register(f.Networking().V1().Ingresses().Informer())
		s.register(f.Core().V1().Services().Informer())
		s.register(f.Core().V1().Endpoints().Informer())
		s.register(f.Discovery().V1().EndpointSlices().Informer())
		s.register(f.Core().V1().Secrets().Informer())
		if gwServed[ResourceBackendTLSPolicies] { // their CA certificates
			s.register(f.Core().V1().ConfigMaps().Informer())
		}
		factories = append(factories, f)
	}
	// IngressClasses and Namespaces are cluster-scoped: one informer each, whatever the
	// watched namespaces.
	cluster := informers.NewSharedInformerFactoryWithOptions(s.cfg.Client, 0, informers.WithTransform(trimObject))
	s.register(cluster.Networking().V1().IngressClasses().Informer())
	s.register(cluster.Core().V1().Namespaces().Informer())
	factories = append(factories, cluster)
	if f := s.registerGatewayClasses(gwServed); f != nil {
		gatewayFactories = append(gatewayFactories, f)
	}

	start := time.Now()
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	for _, f := range gatewayFactories {
		f.Start(ctx.Done())
	}
	var running sync.WaitGroup
	for _, inf := range s.informers {
		running.Go(func() { inf.RunWithContext(ctx) })
	}
	defer running.Wait()
	synced := make([]cache.InformerSynced, 0, len(s.handlers))
	for _, h := range s.handlers {
		synced = append(synced, h.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("the Kubernetes caches did not sync")
	}
	s.mu.Lock()
	s.synced = true
	s.mu.Unlock()
	s.cfg.Logger.Info("kubernetes caches synced", "duration", time.Since(start).String(), "namespaces", namespaces)
	s.notify()
	<-ctx.Done()
	for _, f := range factories {
		f.Shutdown()
	}
	for _, f := range gatewayFactories {
		f.Shutdown()
	}
	return nil
}

// discoverContour finds out which of Contour's kinds the API server serves, retrying
// while it cannot be asked (as the informers would), and warns once about each kind
// that is not served. It returns an error only when ctx ends first.
func (s *Source) discoverContour(ctx context.Context) (contourclient.Served, error) {
	if s.cfg.Contour == nil {
		return contourclient.Served{}, nil
	}
	backoff := 500 * time.Millisecond
	for {
		served, err := contourclient.Discover(s.cfg.Client.Discovery())
		if err == nil {
			if !served.IngressRoutes {
				s.cfg.Logger.Warn("IngressRoute CRD not installed; IngressRoutes are ignored — kubectl apply -f deploy/crds",
					"then", "restart portico to watch them")
			}
			if !served.TLSCertificateDelegations {
				s.cfg.Logger.Warn("TLSCertificateDelegation CRD not installed; TLSCertificateDelegations are ignored — kubectl apply -f deploy/crds",
					"then", "restart portico to watch them")
			}
			if !served.HTTPProxies {
				s.cfg.Logger.Warn("HTTPProxy CRD not installed; HTTPProxies are ignored — kubectl apply -f deploy/crds",
					"then", "restart portico to watch them")
			}
			if !served.ProjectTLSCertificateDelegations {
				s.cfg.Logger.Warn("projectcontour.io TLSCertificateDelegation CRD not installed; delegations of that group are ignored — kubectl apply -f deploy/crds",
					"then", "restart portico to watch them")
			}
			return served, nil
		}
		s.cfg.Logger.Warn("asking the API server whether the IngressRoute and HTTPProxy CRDs are installed; will retry", "err", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
			return contourclient.Served{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// registerContour creates the informers of Contour's kinds served, in namespace ns.
// There is no generated clientset, so they list and watch through each group's REST
// client.
func (s *Source) registerContour(served contourclient.Served, ns string) {
	if s.cfg.Contour == nil {
		return
	}
	old, project := s.cfg.Contour.REST(), s.cfg.Contour.ProjectREST()
	if served.IngressRoutes {
		s.registerREST(old, contourclient.ResourceIngressRoutes, ns, &contourv1beta1.IngressRoute{})
	}
	if served.TLSCertificateDelegations {
		s.registerREST(old, contourclient.ResourceTLSCertificateDelegations, ns, &contourv1beta1.TLSCertificateDelegation{})
	}
	if served.HTTPProxies {
		s.registerREST(project, contourclient.ResourceHTTPProxies, ns, &contourv1.HTTPProxy{})
	}
	if served.ProjectTLSCertificateDelegations {
		s.registerREST(project, contourclient.ResourceTLSCertificateDelegations, ns, &contourv1.TLSCertificateDelegation{})
	}
}

func (s *Source) registerREST(client cache.Getter, resource, ns string, example runtime.Object) {
	lw := cache.NewListWatchFromClient(client, resource, ns, fields.Everything())
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{})
	if err := inf.SetTransform(trimObject); err != nil { // only possible once started
		s.cfg.Logger.Error("setting informer transform", "resource", resource, "err", err)
	}
	s.informers = append(s.informers, inf)
	s.register(inf)
}

func (s *Source) register(inf cache.SharedIndexInformer) {
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.apply(obj, false) },
		UpdateFunc: func(_, obj any) { s.apply(obj, false) },
		DeleteFunc: func(obj any) { s.apply(obj, true) },
	})
	if err != nil { // only possible once the informer is stopped
		s.cfg.Logger.Error("registering informer handler", "err", err)
		return
	}
	s.handlers = append(s.handlers, reg)
}

func (s *Source) apply(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = tomb.Obj, true
	}
	o, ok := obj.(runtime.Object)
	if !ok {
		return
	}
	if !deleted {
		s.warnUndecodable(o)
	}
	s.mu.Lock()
	var changed bool
	if deleted {
		changed = s.store.Delete(o)
	} else {
		changed = s.store.Upsert(o)
	}
	synced := s.synced
	s.mu.Unlock()
	if changed && synced {
		s.notify()
	}
}

// warnUndecodable logs an IngressRoute or HTTPProxy that the client could not decode.
// It is kept, without its spec, so that the graph rejects it whole and its status tells
// its owner what to fix.
func (s *Source) warnUndecodable(o runtime.Object) {
	var kind string
	switch o.(type) {
	case *contourv1beta1.IngressRoute:
		kind = "IngressRoute"
	case *contourv1.HTTPProxy:
		kind = "HTTPProxy"
	default:
		return
	}
	m := o.(metav1.Object)
	if reason, bad := contourclient.Undecodable(m); bad {
		s.cfg.Logger.Warn(kind+" cannot be read; it is invalid until it is fixed",
			"namespace", m.GetNamespace(), "name", m.GetName(), "err", reason)
	}
}

// Resync asks receivers of Changes to rebuild from the current store, e.g. after this
// replica became leader and must write every status once.
func (s *Source) Resync() { s.notify() }

func (s *Source) notify() {
	select {
	case s.changes <- struct{}{}:
	default: // a change is already pending; the receiver will see this one too
	}
}

// trimObject drops what Portico never reads before an object enters the informer's
// cache: managed fields (all but Portico's own on Ingress status, which say whether the
// address there is Portico's to clear), and the data of Secrets that cannot hold a TLS
// certificate. Clusters hold tens of thousands of unrelated Secrets; only their names
// stay in memory.
func trimObject(obj any) (any, error) {
	if acc, ok := obj.(metav1.Object); ok {
		acc.SetManagedFields(ownStatusFields(acc.GetManagedFields()))
	}
	if sec, ok := obj.(*corev1.Secret); ok && !mayHoldCertificate(sec) {
		sec.Data, sec.StringData = nil, nil
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		keepCABundle(cm)
	}
	return obj, nil
}

// caBundleKey is the ConfigMap key a BackendTLSPolicy's caCertificateRefs name, as the
// Gateway API defines it.
const caBundleKey = "ca.crt"

// keepCABundle drops every key of a ConfigMap but the CA bundle BackendTLSPolicies
// read: ConfigMaps are watched only for those, and most hold unrelated data.
func keepCABundle(cm *corev1.ConfigMap) {
	ca, ok := cm.Data[caBundleKey]
	cm.Data, cm.BinaryData = nil, nil
	if ok {
		cm.Data = map[string]string{caBundleKey: ca}
	}
}

func ownStatusFields(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var keep []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Manager == FieldManager && e.Subresource == "status" {
			keep = append(keep, e)
		}
	}
	return keep
}

func mayHoldCertificate(s *corev1.Secret) bool {
	if s.Type == corev1.SecretTypeTLS {
		return true
	}
	_, crt := s.Data[corev1.TLSCertKey]
	_, ca := s.Data["ca.crt"]
	_, crl := s.Data["crl.pem"] // revocation lists of client certificate validation
	return crt || ca || crl
}
