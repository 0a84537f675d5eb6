package dag

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/store"
)

// Processor builds the part of a graph that an API kept in a package of its own adds
// (Gateway API, internal/dag/gatewayapi). dag never imports such a package: internal/app
// passes it in Options.Processors. A processor's objects have data planes of their own
// (Graph.Gateways), so they never compete with Ingress, IngressRoute or HTTPProxy for a
// host: a processor only reads the store and adds Gateways and statuses.
type Processor interface {
	// Process reads the store through p and adds what it serves and every status.
	Process(p *Processing)
	// Kinds are the store kinds Process reads whole: a change of any of them runs it
	// again in an incremental build. Services and Secrets it uses through p are tracked
	// one by one and need not be listed.
	Kinds() []store.Kind
}

// IncrementalProcessor is a Processor that an incremental build can run in part: a
// change that reaches a few of its objects costs in proportion to them, not to all.
type IncrementalProcessor interface {
	Processor
	// NewState returns an empty memory of the processor's builds, for one
	// dag.Incremental.
	NewState() ProcessorState
}

// ProcessorState is what an IncrementalProcessor remembers of its previous build.
type ProcessorState interface {
	// Update builds again what ch reaches, reading the store through p, and returns
	// everything the processor makes now: what Process would add to p.
	Update(p *Processing, ch ProcessorChanges) ProcessorOutput
}

// ProcessorChanges say what changed in the store since a ProcessorState's previous
// Update.
type ProcessorChanges struct {
	// All: process everything (the first build, or the changes are not known).
	All bool
	// Kinds are the store kinds of Processor.Kinds that changed.
	Kinds KindSet
	// Objects are the objects of those kinds added, replaced or removed, when
	// ObjectsKnown; otherwise compare with what the previous build saw. An object may
	// be listed without having changed.
	Objects      []store.Change
	ObjectsKnown bool
	// Deps are the Services (their endpoints included) and Secrets that changed.
	Deps []Dep
}

// KindSet is a set of store kinds.
type KindSet uint64

// Has reports whether k is in the set.
func (ks KindSet) Has(k store.Kind) bool { return ks&(1<<k) != 0 }

// ProcessorOutput is everything a processor makes in one build.
type ProcessorOutput struct {
	// Gateways are ordered by name, Statuses by object (CompareObjectRefs).
	Gateways []*Gateway
	Statuses []*Status
	// Touched are the objects whose status may differ from the previous Update's;
	// Full, when set, says why everything was processed again (then any may).
	Touched []ObjectRef
	Full    string
}

// Dep names a Service (its endpoints included) or a Secret read through Processing: an
// incremental processor ties what it made to the Deps it read (TakeReads), and is told
// which changed (ProcessorChanges.Deps).
type Dep string

// Processing is what a Processor reads and adds in one build. Clusters and Secrets come
// from dag, so that a Service port or a certificate is checked and named one way for all
// APIs.
type Processing struct {
	b        *builder
	gateways []*Gateway
	statuses []*Status
	// deps are the Service and Secret keys read (incremental_keys.go's "s:" and "x:");
	// reads those read since the last TakeReads, when tracked (for a ProcessorState).
	deps    map[string]struct{}
	reads   []Dep
	tracked bool
}

// TakeReads returns the Services and Secrets read through p since the previous call
// (repeats possible); nil unless p is a ProcessorState's.
func (p *Processing) TakeReads() []Dep {
	out := p.reads
	p.reads = nil
	return out
}

// read records that key (a dependency key) was read.
func (p *Processing) read(key string) {
	p.deps[key] = struct{}{}
	if p.tracked {
		p.reads = append(p.reads, Dep(key))
	}
}

// Store is the store being built.
func (p *Processing) Store() *store.Store { return p.b.store }

// Service returns the Service named key, or nil; its changes (endpoints included) run
// the processor again.
func (p *Processing) Service(key types.NamespacedName) *corev1.Service {
	p.read(svcKeyPrefix + nsName(key.Namespace, key.Name))
	return p.b.store.Services[key]
}

// ReadyEndpoints counts the ready endpoints of the port named portName of the Service
// named key; its changes run the processor again.
func (p *Processing) ReadyEndpoints(key types.NamespacedName, portName string) int {
	p.read(svcKeyPrefix + nsName(key.Namespace, key.Name))
	eps, _ := p.b.endpoints(key, portName)
	return len(eps)
}

// ExternalNameRefused says why an ExternalName Service may not be used, or "" (as for
// every API: see Options.AllowExternalName).
func (p *Processing) ExternalNameRefused(svc *corev1.Service) string {
	return p.b.externalNameRefused(svc)
}

// Cluster returns the cluster of a port of svc (read with Service), spoken to with
// protocol ("" for HTTP/1.1, "h2c"), with its ready endpoints; routes to the same port
// and protocol share it.
func (p *Processing) Cluster(svc *corev1.Service, sp corev1.ServicePort, protocol string) *Cluster {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	return p.b.cluster(key, strconv.Itoa(int(sp.Port)), svc, &sp, clusterPolicy{protocol: protocol})
}

// ClusterTLS is Cluster over TLS: protocol "tls" (HTTP/1.1) or "h2", the endpoints'
// certificates verified as v says (Gateway API's BackendTLSPolicy).
func (p *Processing) ClusterTLS(svc *corev1.Service, sp corev1.ServicePort, protocol string, v *UpstreamValidation) *Cluster {
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	return p.b.cluster(key, strconv.Itoa(int(sp.Port)), svc, &sp, clusterPolicy{protocol: protocol, validation: v})
}

// Secret returns the Secret named key, or nil; its changes run the processor again.
func (p *Processing) Secret(key types.NamespacedName) *corev1.Secret {
	p.read(secKeyPrefix + nsName(key.Namespace, key.Name))
	return p.b.store.Secrets[key]
}

// TLSSecret returns the validated certificate and key of the Secret named key; its
// changes run the processor again.
func (p *Processing) TLSSecret(key types.NamespacedName) (*Secret, error) {
	p.read(secKeyPrefix + nsName(key.Namespace, key.Name))
	return p.b.tlsSecret(key)
}

// AddGateway adds the data plane of one Gateway.
func (p *Processing) AddGateway(gw *Gateway) { p.gateways = append(p.gateways, gw) }

// AddStatus adds the status of one object.
func (p *Processing) AddStatus(st Status) { p.statuses = append(p.statuses, &st) }

// AddStatuses adds the statuses of objects, which must not change afterwards.
func (p *Processing) AddStatuses(sts []*Status) { p.statuses = append(p.statuses, sts...) }

// processed is what the processors of one build made.
type processed struct {
	gateways []*Gateway
	statuses []*Status
	deps     map[string]struct{}
}

// builtinProcessors are the processors of a full build of s: dag's own (the
// ExtensionServices' statuses, when s has any) and opts.Processors.
func builtinProcessors(s *store.Store, opts Options) []Processor {
	if len(s.ExtensionServices) == 0 || opts.coreOnly {
		return opts.Processors
	}
	return append([]Processor{extensionStatuses{}}, opts.Processors...)
}

// runProcessors runs procs (opts.Processors when none are given) on s, with a builder
// of their own: their clusters are the same as the other APIs' in name and content, so
// a graph built whole and one built incrementally agree.
func runProcessors(s *store.Store, opts Options, procs ...Processor) processed {
	if len(procs) == 0 {
		procs = opts.Processors
	}
	if len(procs) == 0 {
		return processed{}
	}
	p := newProcessing(s, opts)
	for _, proc := range procs {
		proc.Process(p)
	}
	slices.SortFunc(p.gateways, func(a, c *Gateway) int {
		return strings.Compare(a.Name.String(), c.Name.String())
	})
	slices.SortStableFunc(p.statuses, func(a, c *Status) int { return CompareObjectRefs(a.Object, c.Object) })
	return processed{gateways: p.gateways, statuses: p.statuses, deps: p.deps}
}

func newProcessing(s *store.Store, opts Options) *Processing {
	return &Processing{b: newBuilder(s, opts.withDefaults(), 0), deps: map[string]struct{}{}}
}

// withProcessed returns g with what the processors made: g itself when they made nothing.
func withProcessed(g *Graph, pr processed) *Graph {
	if len(pr.gateways) == 0 && len(pr.statuses) == 0 {
		return g
	}
	out := *g
	out.Gateways = pr.gateways
	out.Statuses = mergeSorted(g.Statuses, pr.statuses)
	return &out
}

// mergeSorted merges two status lists ordered by object.
func mergeSorted(a, b []*Status) []*Status {
	out := make([]*Status, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if CompareObjectRefs(b[j].Object, a[i].Object) < 0 {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}
