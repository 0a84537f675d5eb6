package dag

import (
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"

	"github.com/portico-dev/portico/internal/store"
)

// Incremental builds the same graph as Build, recomputing only what a change can affect.
//
// The routing objects (Ingresses, IngressRoutes, HTTPProxies) fall into components:
// objects that share a host, or that delegate or include one another, are in one
// component (see objectKeys); objects of different components never affect each other's
// routes or status. The graph is the union of the components' graphs. A change rebuilds,
// with Build itself on a store holding just them, the components of the objects that
// changed and of the objects that use a changed Service, endpoints or Secret; the other
// components keep their virtual hosts and statuses, pointer for pointer, which lets the
// translator skip them too. A change of IngressClasses or certificate delegations, a
// first build, or a change that reaches half the objects is built whole.
//
// Build stays the reference: the property test checks that every incremental result
// equals Build's on the same store.
//
// An Incremental is not safe for concurrent use. The stores passed to successive calls
// may be one store changed in place between calls, or different stores: changes are
// found by comparing object pointers with the previous call's, so an object must be
// replaced, never modified in place, when it changes (as informers and the manifest
// source do).
type Incremental struct {
	opts Options
	seen seenObjects

	objs     map[ObjectRef]*objState
	links    keyIndex
	deps     keyIndex
	children map[string]map[string]int // wildcard domain → precise host keys under it → holders
	comps    map[int]*component
	nextComp int
	graph    *Graph
	// trusted is false until a full build's graph has been split into components, and
	// after a split failed: then every call builds whole.
	trusted bool
	// maxFraction is the share of the objects above which a change is built whole
	// (rebuilding most components one by one costs more than one full build).
	maxFraction float64

	// touched are the objects the last call rebuilt or removed (see Touched).
	touched []ObjectRef

	// runs are the processors (Options.Processors), each with what it made last;
	// processed is what they made together, and out the graph last returned: outCore (a
	// graph of the routing objects) with processed added.
	runs      []*processorRun
	processed processed
	out       *Graph
	outCore   *Graph
	// last is the graph last returned, with the installation's extensions.
	last *Graph

	// Stats of the last call, for tests, metrics and benchmarks.
	LastStats IncrementalStats
}

// Touched returns the objects whose status or version the last Build may have changed:
// those it rebuilt and those removed; all is true after a full build.
func (inc *Incremental) Touched() (refs []ObjectRef, all bool) {
	return inc.touched, inc.LastStats.Full
}

// IncrementalStats say how much the last Build recomputed.
type IncrementalStats struct {
	Full bool
	// Reason says why a build was full.
	Reason string
	// Objects is the number of routing objects rebuilt.
	Objects int
	// ProcessorsFull says why a processor (Gateway API) built everything again, "" when
	// none did (it built in part, or had nothing to do).
	ProcessorsFull string
}

// Why a build was full.
const (
	ReasonFirst   = "first build"
	ReasonClasses = "IngressClasses or certificate delegations changed"
	ReasonLarge   = "the change reaches most objects"
	// ReasonUnaccounted means the components did not account for the graph: a bug in
	// objectKeys, caught before it could serve a wrong graph.
	ReasonUnaccounted = "the components did not account for the graph"
)

// objState is what the builder remembers of a routing object.
type objState struct {
	keys objectKeys
	comp int
}

// component is one group of routing objects and what they contribute to the graph.
type component struct {
	objects  []ObjectRef
	http     []*VirtualHost
	https    []*SecureVirtualHost
	statuses []*Status
}

// NewIncremental returns an Incremental building with opts.
func NewIncremental(opts Options) *Incremental {
	inc := &Incremental{opts: opts, maxFraction: 0.5, runs: newProcessorRuns(append([]Processor{extensionStatuses{}}, opts.Processors...))}
	inc.reset()
	return inc
}

func (inc *Incremental) reset() {
	inc.seen = newSeenObjects()
	inc.objs = map[ObjectRef]*objState{}
	inc.links = keyIndex{}
	inc.deps = keyIndex{}
	inc.children = map[string]map[string]int{}
	inc.comps = map[int]*component{}
	inc.graph = nil
	inc.trusted = false
	// runs and processed stay: withProcessors decides when the processors run again.
}

// Build returns the graph of s, as Build(s, opts) would.
func (inc *Incremental) Build(s *store.Store) *Graph {
	g := inc.build0(s)
	var prev *Extensions
	if inc.last != nil {
		prev = inc.last.Extensions
	}
	inc.last = withExtensions(g, s, inc.opts, prev)
	return inc.last
}

// build0 is Build without the installation's extensions.
func (inc *Incremental) build0(s *store.Store) *Graph {
	ch := inc.seen.diff(s)
	switch {
	case !inc.trusted:
		return inc.withProcessors(s, inc.full(s, ReasonFirst), ch, true)
	case ch.everything:
		return inc.withProcessors(s, inc.full(s, ReasonClasses), ch, true)
	}
	if len(ch.objects) == 0 && len(ch.deps) == 0 {
		inc.LastStats = IncrementalStats{}
		inc.touched = nil
		return inc.withProcessors(s, inc.graph, ch, false)
	}
	return inc.withProcessors(s, inc.build(s, ch), ch, false)
}

// build rebuilds the components that ch reaches.
func (inc *Incremental) build(s *store.Store, ch changes) *Graph {
	ch.objects = inc.withExtensionUsers(ch)
	seedKeys, seedObjs, oldComps := inc.applyChanges(s, ch)
	for _, dep := range ch.deps {
		for ref := range inc.deps.refs(dep) {
			seedObjs[ref] = struct{}{}
		}
	}
	closure := inc.closure(seedKeys, seedObjs)
	if float64(len(closure)) > inc.maxFraction*float64(len(inc.objs)) {
		return inc.full(s, ReasonLarge)
	}
	for ref := range closure {
		if st := inc.objs[ref]; st.comp != 0 {
			oldComps[st.comp] = true
		}
	}
	// Every member of a replaced component must be rebuilt (closure guarantees it; the
	// check keeps a bug in it from silently dropping an object's routes).
	for id := range oldComps {
		for _, ref := range inc.comps[id].objects {
			if _, in := closure[ref]; !in && inc.objs[ref] != nil {
				return inc.full(s, ReasonUnaccounted)
			}
		}
	}
	sub := Build(subStore(s, closure), inc.coreOpts())
	added, ok := inc.split(sub, closure)
	if !ok {
		return inc.full(s, ReasonUnaccounted)
	}
	inc.graph = inc.merge(oldComps, added)
	inc.LastStats = IncrementalStats{Objects: len(closure)}
	inc.touched = inc.touched[:0]
	for ref := range closure {
		inc.touched = append(inc.touched, ref)
	}
	for _, ref := range ch.objects {
		if _, in := closure[ref]; !in {
			inc.touched = append(inc.touched, ref) // removed
		}
	}
	return inc.graph
}

// withExtensionUsers adds to the changed objects those that name a changed
// ExtensionService: their keys include its Services and CA Secret, which it may have
// changed, so they are keyed again, not only rebuilt.
func (inc *Incremental) withExtensionUsers(ch changes) []ObjectRef {
	out := ch.objects
	for _, dep := range ch.deps {
		if !strings.HasPrefix(dep, extKeyPrefix) {
			continue
		}
		for ref := range inc.deps.refs(dep) {
			out = append(out, ref)
		}
	}
	return out
}

// applyChanges updates the indexes for the routing objects that changed, returning the
// keys they had and have, the changed objects that still exist, and their old components.
func (inc *Incremental) applyChanges(s *store.Store, ch changes) ([]string, map[ObjectRef]struct{}, map[int]bool) {
	var seedKeys []string
	seedObjs := map[ObjectRef]struct{}{}
	oldComps := map[int]bool{}
	for _, ref := range ch.objects {
		if _, done := seedObjs[ref]; done {
			continue // listed twice (withExtensionUsers)
		}
		if st := inc.objs[ref]; st != nil {
			seedKeys = append(seedKeys, st.keys.links...)
			if st.comp != 0 {
				oldComps[st.comp] = true
			}
			inc.unindex(ref, st.keys)
			delete(inc.objs, ref)
		}
		keys, ok := currentKeys(s, ref, inc.opts)
		if !ok {
			continue
		}
		inc.objs[ref] = &objState{keys: keys}
		inc.index(ref, keys)
		seedKeys = append(seedKeys, keys.links...)
		seedObjs[ref] = struct{}{}
	}
	return seedKeys, seedObjs, oldComps
}

// currentKeys returns the keys of the object ref names in s, or false if s has none.
func currentKeys(s *store.Store, ref ObjectRef, opts Options) (objectKeys, bool) {
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	switch ref.Kind {
	case KindIngress:
		if o := s.Ingresses[key]; o != nil {
			return ingressKeys(o, opts), true
		}
	case KindIngressRoute:
		if o := s.IngressRoutes[key]; o != nil {
			return ingressRouteKeys(o), true
		}
	case KindHTTPProxy:
		if o := s.HTTPProxies[key]; o != nil {
			return httpProxyKeys(o, s, opts), true
		}
	}
	return objectKeys{}, false
}

func (inc *Incremental) index(ref ObjectRef, k objectKeys) {
	for _, l := range k.links {
		if inc.links.add(l, ref) {
			inc.noteHostKey(l, 1)
		}
	}
	for _, d := range k.deps {
		inc.deps.add(d, ref)
	}
}

func (inc *Incremental) unindex(ref ObjectRef, k objectKeys) {
	for _, l := range k.links {
		if inc.links.remove(l, ref) {
			inc.noteHostKey(l, -1)
		}
	}
	for _, d := range k.deps {
		inc.deps.remove(d, ref)
	}
}

// noteHostKey keeps children: which precise host keys exist under each domain.
func (inc *Incremental) noteHostKey(key string, delta int) {
	parent, ok := parentDomain(key)
	if !ok {
		return
	}
	m := inc.children[parent]
	if m == nil {
		m = map[string]int{}
		inc.children[parent] = m
	}
	m[key] += delta
	if m[key] <= 0 {
		delete(m, key)
		if len(m) == 0 {
			delete(inc.children, parent)
		}
	}
}

// closure returns every object linked, directly or through other objects, to the seed
// keys and objects: the objects of every component a change touches, before and after it.
func (inc *Incremental) closure(seedKeys []string, seedObjs map[ObjectRef]struct{}) map[ObjectRef]struct{} {
	out := map[ObjectRef]struct{}{}
	seenKeys := map[string]bool{}
	queue := seedKeys
	visitObj := func(ref ObjectRef) {
		if _, done := out[ref]; done {
			return
		}
		out[ref] = struct{}{}
		if st := inc.objs[ref]; st != nil {
			queue = append(queue, st.keys.links...)
		}
	}
	for ref := range seedObjs {
		visitObj(ref)
	}
	for len(queue) > 0 {
		key := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seenKeys[key] {
			continue
		}
		seenKeys[key] = true
		for ref := range inc.links.refs(key) {
			visitObj(ref)
		}
		if w, ok := wildcardAbove(key); ok && inc.links.has(w) {
			queue = append(queue, w)
		}
		if d, ok := wildcardDomain(key); ok {
			for child := range inc.children[d] {
				queue = append(queue, child)
			}
		}
	}
	return out
}

// subStore is s with only the routing objects in refs; everything they use is shared.
func subStore(s *store.Store, refs map[ObjectRef]struct{}) *store.Store {
	sub := *s
	sub.Ingresses = map[types.NamespacedName]*networkingv1.Ingress{}
	sub.IngressRoutes = map[types.NamespacedName]*ingressroutev1.IngressRoute{}
	sub.HTTPProxies = map[types.NamespacedName]*contourv1.HTTPProxy{}
	for ref := range refs {
		key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		switch ref.Kind {
		case KindIngress:
			sub.Ingresses[key] = s.Ingresses[key]
		case KindIngressRoute:
			sub.IngressRoutes[key] = s.IngressRoutes[key]
		case KindHTTPProxy:
			sub.HTTPProxies[key] = s.HTTPProxies[key]
		}
	}
	return &sub
}

// full builds s whole and splits the result into components.
func (inc *Incremental) full(s *store.Store, reason string) *Graph {
	inc.reset()
	inc.seen.diff(s) // record everything as seen
	for ref := range allRoutingRefs(s) {
		keys, _ := currentKeys(s, ref, inc.opts)
		inc.objs[ref] = &objState{keys: keys}
		inc.index(ref, keys)
	}
	all := make(map[ObjectRef]struct{}, len(inc.objs))
	for ref := range inc.objs {
		all[ref] = struct{}{}
	}
	g := Build(s, inc.coreOpts())
	// A graph the keys cannot account for is still served whole; the next change builds
	// everything again rather than trusting components.
	_, inc.trusted = inc.split(g, all)
	inc.graph = g
	inc.LastStats = IncrementalStats{Full: true, Reason: reason, Objects: len(inc.objs)}
	inc.touched = nil
	return g
}

func allRoutingRefs(s *store.Store) map[ObjectRef]struct{} {
	out := make(map[ObjectRef]struct{}, len(s.Ingresses)+len(s.IngressRoutes)+len(s.HTTPProxies))
	for k := range s.Ingresses {
		out[ObjectRef{Kind: KindIngress, Namespace: k.Namespace, Name: k.Name}] = struct{}{}
	}
	for k := range s.IngressRoutes {
		out[ObjectRef{Kind: KindIngressRoute, Namespace: k.Namespace, Name: k.Name}] = struct{}{}
	}
	for k := range s.HTTPProxies {
		out[ObjectRef{Kind: KindHTTPProxy, Namespace: k.Namespace, Name: k.Name}] = struct{}{}
	}
	return out
}

// split groups the objects in refs into components and hands each the virtual hosts and
// statuses of g that are its own. It reports false when g has a host or a status that no
// object in refs accounts for (the keys missed something): the caller builds whole.
func (inc *Incremental) split(g *Graph, refs map[ObjectRef]struct{}) ([]*component, bool) {
	uf := newUnionFind(refs)
	rep := map[string]ObjectRef{}
	link := func(ref ObjectRef, key string) {
		if r, ok := rep[key]; ok {
			uf.union(ref, r)
		} else {
			rep[key] = ref
		}
	}
	for ref := range refs {
		for _, l := range inc.objs[ref].keys.links {
			link(ref, l)
			if w, ok := wildcardAbove(l); ok && inc.links.has(w) {
				link(ref, w)
			}
		}
	}
	byRoot := map[ObjectRef]*component{}
	compOf := func(ref ObjectRef) *component {
		r := uf.find(ref)
		c := byRoot[r]
		if c == nil {
			c = &component{}
			byRoot[r] = c
		}
		return c
	}
	hostComp := func(name string) (*component, bool) {
		for ref := range inc.links.refs(hostKey(name)) {
			if _, in := refs[ref]; in {
				return compOf(ref), true
			}
		}
		return nil, false
	}
	for _, vh := range g.HTTP {
		c, ok := hostComp(vh.Name)
		if !ok {
			return nil, false
		}
		c.http = append(c.http, vh)
	}
	for _, svh := range g.HTTPS {
		c, ok := hostComp(svh.Name)
		if !ok {
			return nil, false
		}
		c.https = append(c.https, svh)
	}
	for _, st := range g.Statuses {
		if _, in := refs[st.Object]; !in {
			return nil, false
		}
		c := compOf(st.Object)
		c.statuses = append(c.statuses, st)
	}
	out := make([]*component, 0, len(byRoot))
	for ref := range refs {
		c := compOf(ref)
		c.objects = append(c.objects, ref)
	}
	for _, c := range byRoot {
		inc.nextComp++
		inc.comps[inc.nextComp] = c
		for _, ref := range c.objects {
			inc.objs[ref].comp = inc.nextComp
		}
		out = append(out, c)
	}
	return out, true
}

// merge replaces the components in removed by added in the current graph. The result
// is a new Graph: the previous one may still be read (by the status writer).
func (inc *Incremental) merge(removed map[int]bool, added []*component) *Graph {
	var (
		dropHTTP  []string
		dropHTTPS []string
		dropObjs  []ObjectRef
		addHTTP   []*VirtualHost
		addHTTPS  []*SecureVirtualHost
		addStatus []*Status
	)
	for id := range removed {
		c := inc.comps[id]
		for _, vh := range c.http {
			dropHTTP = append(dropHTTP, vh.Name)
		}
		for _, svh := range c.https {
			dropHTTPS = append(dropHTTPS, svh.Name)
		}
		for _, st := range c.statuses {
			dropObjs = append(dropObjs, st.Object)
		}
		delete(inc.comps, id)
	}
	for _, c := range added {
		addHTTP = append(addHTTP, c.http...)
		addHTTPS = append(addHTTPS, c.https...)
		addStatus = append(addStatus, c.statuses...)
	}
	old := inc.graph
	sort.Slice(addHTTP, func(i, j int) bool { return addHTTP[i].Name < addHTTP[j].Name })
	sort.Slice(addHTTPS, func(i, j int) bool { return addHTTPS[i].Name < addHTTPS[j].Name })
	sort.SliceStable(addStatus, func(i, j int) bool { return refLess(addStatus[i].Object, addStatus[j].Object) })
	return &Graph{
		HTTP: spliceSorted(old.HTTP, dropHTTP, addHTTP, func(vh *VirtualHost) string { return vh.Name },
			func(a, b string) int { return cmpString(a, b) }),
		HTTPS: spliceSorted(old.HTTPS, dropHTTPS, addHTTPS, func(svh *SecureVirtualHost) string { return svh.Name },
			func(a, b string) int { return cmpString(a, b) }),
		Statuses: spliceSorted(old.Statuses, dropObjs, addStatus, func(st *Status) ObjectRef { return st.Object }, CompareObjectRefs),
	}
}

// spliceSorted returns old (sorted by key) without the elements whose key is in drop,
// merged with add (sorted). Elements of equal key keep their order.
func spliceSorted[T any, K any](old []T, drop []K, add []T, key func(T) K, cmp func(a, b K) int) []T {
	skip := map[int]bool{}
	for _, k := range drop {
		i := sort.Search(len(old), func(i int) bool { return cmp(key(old[i]), k) >= 0 })
		for ; i < len(old) && cmp(key(old[i]), k) == 0; i++ {
			skip[i] = true
		}
	}
	n := len(old) - len(skip) + len(add)
	if n == 0 {
		return nil // as Build leaves an empty graph
	}
	out := make([]T, 0, n)
	j := 0
	for i, v := range old {
		if skip[i] {
			continue
		}
		for j < len(add) && cmp(key(add[j]), key(v)) < 0 {
			out = append(out, add[j])
			j++
		}
		out = append(out, v)
	}
	return append(out, add[j:]...)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CompareObjectRefs orders objects as Graph.Statuses are ordered: kind, namespace, name.
func CompareObjectRefs(a, b ObjectRef) int {
	if c := cmpString(a.Kind, b.Kind); c != 0 {
		return c
	}
	if c := cmpString(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmpString(a.Name, b.Name)
}

// StatusesOf returns the statuses of ref in statuses, which are ordered by object as
// Graph.Statuses is, found by binary search.
func StatusesOf(statuses []*Status, ref ObjectRef) []*Status {
	i, _ := slices.BinarySearchFunc(statuses, ref, func(st *Status, r ObjectRef) int { return CompareObjectRefs(st.Object, r) })
	j := i
	for j < len(statuses) && statuses[j].Object == ref {
		j++
	}
	return statuses[i:j]
}

func refLess(a, b ObjectRef) bool { return CompareObjectRefs(a, b) < 0 }

type unionFind struct{ parent map[ObjectRef]ObjectRef }

func newUnionFind(refs map[ObjectRef]struct{}) *unionFind {
	uf := &unionFind{parent: make(map[ObjectRef]ObjectRef, len(refs))}
	for ref := range refs {
		uf.parent[ref] = ref
	}
	return uf
}

func (uf *unionFind) find(r ObjectRef) ObjectRef {
	for uf.parent[r] != r {
		uf.parent[r] = uf.parent[uf.parent[r]]
		r = uf.parent[r]
	}
	return r
}

// union joins a and b; b outside the set (an object not being rebuilt) is ignored.
func (uf *unionFind) union(a, b ObjectRef) {
	if _, ok := uf.parent[b]; !ok {
		return
	}
	ra, rb := uf.find(a), uf.find(b)
	if ra != rb {
		uf.parent[ra] = rb
	}
}

// changes are what differs between a store and the previous one.
type changes struct {
	everything bool
	objects    []ObjectRef
	deps       []string
	// kinds has bit k set when store kind k changed and is none of the kinds above
	// (Namespaces, Gateway API): what processors read.
	kinds KindSet
	// procObjects are the objects of those kinds that changed, when procKnown (the
	// store's journal told).
	procObjects []store.Change
	procKnown   bool
}

// seenObjects are the object pointers of the previous call.
type seenObjects struct {
	ingresses       map[types.NamespacedName]*networkingv1.Ingress
	ingressRoutes   map[types.NamespacedName]*ingressroutev1.IngressRoute
	proxies         map[types.NamespacedName]*contourv1.HTTPProxy
	services        map[types.NamespacedName]*corev1.Service
	endpoints       map[types.NamespacedName]*corev1.Endpoints
	slices          map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
	secrets         map[types.NamespacedName]*corev1.Secret
	classes         map[string]*networkingv1.IngressClass
	delegations     map[types.NamespacedName]*ingressroutev1.TLSCertificateDelegation
	projDelegations map[types.NamespacedName]*contourv1.TLSCertificateDelegation
	extensions      map[types.NamespacedName]*contourv1alpha1.ExtensionService
	// gens are the generations of the store last seen: a kind whose generation did not
	// change need not be compared object by object. journal is its journal: when the next
	// store's journal tells which objects changed since, only those are compared.
	gens    store.Generations
	journal *store.Journal
}

func newSeenObjects() seenObjects {
	return seenObjects{
		ingresses:       map[types.NamespacedName]*networkingv1.Ingress{},
		ingressRoutes:   map[types.NamespacedName]*ingressroutev1.IngressRoute{},
		proxies:         map[types.NamespacedName]*contourv1.HTTPProxy{},
		services:        map[types.NamespacedName]*corev1.Service{},
		endpoints:       map[types.NamespacedName]*corev1.Endpoints{},
		slices:          map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{},
		secrets:         map[types.NamespacedName]*corev1.Secret{},
		classes:         map[string]*networkingv1.IngressClass{},
		delegations:     map[types.NamespacedName]*ingressroutev1.TLSCertificateDelegation{},
		projDelegations: map[types.NamespacedName]*contourv1.TLSCertificateDelegation{},
		extensions:      map[types.NamespacedName]*contourv1alpha1.ExtensionService{},
	}
}

// diff records s as seen and returns what changed since the previous call.
func (sn *seenObjects) diff(s *store.Store) changes {
	var ch changes
	gens, journal := s.Generations(), s.Journal()
	defer func() { sn.gens, sn.journal = gens, journal }()
	if sn.journal != nil && gens.Lineage != nil && gens.Lineage == sn.gens.Lineage {
		if changed, ok := journal.ChangesSince(sn.journal); ok {
			ch.procKnown = true
			for _, c := range changed {
				sn.diffKey(s, c, &ch)
			}
			return ch
		}
	}
	routing := func(kind string) func(types.NamespacedName) {
		return func(k types.NamespacedName) {
			ch.objects = append(ch.objects, ObjectRef{Kind: kind, Namespace: k.Namespace, Name: k.Name})
		}
	}
	dep := func(prefix string) func(types.NamespacedName) {
		return func(k types.NamespacedName) { ch.deps = append(ch.deps, prefix+nsName(k.Namespace, k.Name)) }
	}
	everything := func(string) { ch.everything = true }
	everythingNN := func(types.NamespacedName) { ch.everything = true }
	changed := func(k store.Kind) bool { return !gens.Unchanged(sn.gens, k) }
	diffIf(changed(store.KindIngress), sn.ingresses, s.Ingresses, routing(KindIngress))
	diffIf(changed(store.KindIngressRoute), sn.ingressRoutes, s.IngressRoutes, routing(KindIngressRoute))
	diffIf(changed(store.KindHTTPProxy), sn.proxies, s.HTTPProxies, routing(KindHTTPProxy))
	diffIf(changed(store.KindService), sn.services, s.Services, dep(svcKeyPrefix))
	diffIf(changed(store.KindEndpoints), sn.endpoints, s.Endpoints, dep(svcKeyPrefix))
	if changed(store.KindEndpointSlice) {
		diffSlices(sn.slices, s.EndpointSlices, dep(svcKeyPrefix))
	}
	diffIf(changed(store.KindSecret), sn.secrets, s.Secrets, dep(secKeyPrefix))
	// Classes decide which Ingresses are Portico's, and delegations which namespaces may
	// use which Secrets: both are rare changes that can reach any object.
	diffIf(changed(store.KindIngressClass), sn.classes, s.IngressClasses, everything)
	diffIf(changed(store.KindTLSCertificateDelegation), sn.delegations, s.TLSCertificateDelegations, everythingNN)
	diffIf(changed(store.KindProjectTLSCertificateDelegation), sn.projDelegations, s.ProjectTLSCertificateDelegations, everythingNN)
	// An ExtensionService is read by the HTTPProxies that name it (a dependency) and
	// by its own processor (a kind).
	diffIf(changed(store.KindExtensionService), sn.extensions, s.ExtensionServices, dep(extKeyPrefix))
	for _, k := range processorKinds {
		if changed(k) {
			ch.kinds |= 1 << k
		}
	}
	return ch
}

// processorKinds are the store kinds that no rule of this file compares object by
// object: a processor that reads one of them runs again when its generation moves.
var processorKinds = []store.Kind{store.KindNamespace, store.KindGatewayClass, store.KindGateway, store.KindListenerSet,
	store.KindHTTPRoute, store.KindGRPCRoute, store.KindTLSRoute, store.KindReferenceGrant, store.KindBackendTLSPolicy, store.KindConfigMap, store.KindGatewayAPICRD, store.KindExtensionService}

// diffKey compares the one object a journal entry names, adding it to ch if it changed.
func (sn *seenObjects) diffKey(s *store.Store, c store.Change, ch *changes) {
	k := c.Key
	routing := func(kind string) func() {
		return func() { ch.objects = append(ch.objects, ObjectRef{Kind: kind, Namespace: k.Namespace, Name: k.Name}) }
	}
	dep := func(prefix string) func() {
		return func() { ch.deps = append(ch.deps, prefix+nsName(k.Namespace, k.Name)) }
	}
	everything := func() { ch.everything = true }
	switch c.Kind {
	case store.KindIngress:
		diffOne(sn.ingresses, s.Ingresses, k, routing(KindIngress))
	case store.KindIngressRoute:
		diffOne(sn.ingressRoutes, s.IngressRoutes, k, routing(KindIngressRoute))
	case store.KindHTTPProxy:
		diffOne(sn.proxies, s.HTTPProxies, k, routing(KindHTTPProxy))
	case store.KindService:
		diffOne(sn.services, s.Services, k, dep(svcKeyPrefix))
	case store.KindEndpoints:
		diffOne(sn.endpoints, s.Endpoints, k, dep(svcKeyPrefix))
	case store.KindEndpointSlice:
		cur, had := s.EndpointSlices[k], sn.slices[k]
		if !maps.Equal(cur, had) || (cur == nil) != (had == nil) {
			if cur == nil {
				delete(sn.slices, k)
			} else {
				sn.slices[k] = maps.Clone(cur)
			}
			dep(svcKeyPrefix)()
		}
	case store.KindSecret:
		diffOne(sn.secrets, s.Secrets, k, dep(secKeyPrefix))
	case store.KindIngressClass:
		diffOne(sn.classes, s.IngressClasses, k.Name, everything)
	case store.KindTLSCertificateDelegation:
		diffOne(sn.delegations, s.TLSCertificateDelegations, k, everything)
	case store.KindProjectTLSCertificateDelegation:
		diffOne(sn.projDelegations, s.ProjectTLSCertificateDelegations, k, everything)
	case store.KindExtensionService:
		diffOne(sn.extensions, s.ExtensionServices, k, dep(extKeyPrefix))
		ch.kinds |= 1 << c.Kind
		ch.procObjects = append(ch.procObjects, c)
	default:
		ch.kinds |= 1 << c.Kind
		ch.procObjects = append(ch.procObjects, c)
	}
}

// diffOne makes seen[k] equal to cur[k], calling changed if it was not.
func diffOne[K comparable, V comparable](seen, cur map[K]V, k K, changed func()) {
	old, had := seen[k]
	now, has := cur[k]
	if had == has && old == now {
		return
	}
	if has {
		seen[k] = now
	} else {
		delete(seen, k)
	}
	changed()
}

// diffIf runs diffMap when the kind may have changed.
func diffIf[K comparable, V comparable](mayHaveChanged bool, seen, cur map[K]V, changed func(K)) {
	if mayHaveChanged {
		diffMap(seen, cur, changed)
	}
}

// diffMap makes seen equal to cur, calling changed for every key added, replaced (a
// different pointer) or removed.
func diffMap[K comparable, V comparable](seen, cur map[K]V, changed func(K)) {
	before, kept := len(seen), 0
	for k, v := range cur {
		old, ok := seen[k]
		if ok {
			kept++
			if old == v {
				continue
			}
		}
		seen[k] = v
		changed(k)
	}
	if kept == before {
		return
	}
	for k := range seen {
		if _, ok := cur[k]; !ok {
			delete(seen, k)
			changed(k)
		}
	}
}

func diffSlices(seen, cur map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice, changed func(types.NamespacedName)) {
	for svc, slices := range cur {
		if old, ok := seen[svc]; !ok || !maps.Equal(old, slices) {
			seen[svc] = maps.Clone(slices)
			changed(svc)
		}
	}
	if len(seen) == len(cur) {
		return
	}
	for svc := range seen {
		if _, ok := cur[svc]; !ok {
			delete(seen, svc)
			changed(svc)
		}
	}
}

// coreOpts are the options of the builds of the routing objects, which the components
// account for; the processors' part of the graph is built apart (withProcessors).
func (inc *Incremental) coreOpts() Options {
	o := inc.opts
	o.Processors = nil
	o.coreOnly = true
	return o
}
