package server

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"unsafe"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
)

// deltaCache is the cache the xDS server serves from. State-of-the-world watches and
// fetches go to go-control-plane's SnapshotCache, which is given every snapshot; delta
// watches are answered here, with go-control-plane's semantics (createDeltaResponse),
// but in proportion to what changed: go-control-plane compares every resource of every
// watched type with what the client holds on every snapshot, every cluster and load
// assignment per client for a one-cluster change, and builds a new map of
// the client's versions each time. Here a client whose versions are a map this cache
// made is known to hold a published typeSet (see clientState), and is sent what the
// changeLog says changed since; other clients (a new subscription, a reconnect with
// initial_resource_versions, a subscription change) are compared in full, as
// go-control-plane does, once.
type deltaCache struct {
	cachev3.SnapshotCache

	mu sync.Mutex
	// current is the last snapshot set; published is false until the first one, when
	// a watch waits as go-control-plane's does without a snapshot.
	current   state
	published bool
	logs      [numTypes]changeLog
	watches   map[int64]*deltaWatch
	lastID    int64
	// clients are the version maps this cache returned, by identity: each is owned by
	// this cache and the one stream that holds it (see clientState).
	clients map[unsafe.Pointer]*clientState
	// epoch counts the snapshots set, to forget the clients of streams the cache
	// does not know (see forgetIdleClients).
	epoch uint64
	// streamOf is the stream of each request passed to the Server's callbacks
	// and not yet to CreateDeltaWatch; serves counts the Serve calls, whose
	// streams are numbered anew (see streamCallbacks).
	streamOf map[*discoveryv3.DeltaDiscoveryRequest]streamKey
	serves   int64
}

// clientStateTTL is how many snapshots the state of a stream with no open watch is
// kept when the cache does not know the stream (a watch not made through Serve): a
// stream closed is forgotten after it. The states of the streams Serve accepts are
// forgotten when the stream ends, and not before: one that takes long to answer a
// response must still be known when it NACKs it (see clientState.sent).
const clientStateTTL = changeLogLength

func newDeltaCache() *deltaCache {
	return &deltaCache{
		SnapshotCache: cachev3.NewSnapshotCache(true, allNodes{}, nil),
		watches:       map[int64]*deltaWatch{},
		clients:       map[unsafe.Pointer]*clientState{},
		streamOf:      map[*discoveryv3.DeltaDiscoveryRequest]streamKey{},
	}
}

// clientState is what one stream holds of one type: returned, the map of versions
// the stream's subscription keeps (go-control-plane's server stores the map a
// response carries and passes it back with the next watch), equal to the resources
// of the typeSet numbered seq that the subscription covers. When owned, the map was
// made by this cache, which updates it in place: the stream only reads it, or changes
// it on a subscription change, which the request that carries it shows (the state is
// then dropped). An owned map is used by one watch at a time, the stream's, whose
// previous watch is cancelled before the next is made, under mu; so it is never
// written concurrently. A map the cache did not make (initial_resource_versions, or
// kept after a subscription change) is never written: once a full comparison found
// nothing to send, its watch has a state that is not owned, so that the snapshots
// that change nothing it covers are not compared in full again.
type clientState struct {
	returned   map[string]string
	typ        int
	seq        uint64
	owned      bool
	wildcard   bool
	subscribed int // how many names were subscribed: a check that nothing changed
	watched    bool
	idleSince  uint64
	stream     streamKey // the zero key when not known
	// sent are the names of the last response sent (updated and removed). A
	// client that NACKs it keeps the versions it had (a response is applied
	// whole or not at all), so those names are sent again, in retry, with the
	// next snapshot: not at once, which the client would refuse again, and not
	// only when they change again, which would leave a good change that came
	// with a bad one unapplied.
	sent, retry []string
}

type deltaWatch struct {
	req    *cachev3.DeltaRequest
	sub    cachev3.Subscription
	out    chan cachev3.DeltaResponse
	typ    int
	state  *clientState // nil when the client's versions are not related to a typeSet
	stream streamKey
	// scope is the part of the listeners the client is served (scope.go).
	scope scope
}

func mapKey(m map[string]string) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// CreateDeltaWatch answers req at once when there is something to send, else opens
// a watch answered by the next snapshot that has, as go-control-plane's does.
func (c *deltaCache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, out chan cachev3.DeltaResponse) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &deltaWatch{req: req, sub: sub, out: out, typ: watchedSet(req), stream: c.streamOf[req], scope: scopeOf(req.GetNode())}
	delete(c.streamOf, req)
	if w.typ == vhostIdx {
		forgetUnsubscribedNamespaces(req, sub)
	}
	w.state = c.stateOf(w)
	if c.published {
		sent, err := c.respond(context.Background(), w)
		if err != nil || sent {
			c.release(w)
			return nil, err
		}
	}
	c.lastID++
	id := c.lastID
	c.watches[id] = w
	if w.state != nil {
		w.state.watched = true
	}
	return func() { c.cancel(id) }, nil
}

// watchedSet is the index of the set that answers req: the route configurations as
// VHDS clients see them for a client that asks for VHDS.
func watchedSet(req *cachev3.DeltaRequest) int {
	i := typeIndex(req.GetTypeUrl())
	if i == routeIdx && wantsVHDS(req.GetNode()) {
		return vhdsRouteIdx
	}
	return i
}

// stateOf returns the state the client of w is known to be in, nil if none.
func (c *deltaCache) stateOf(w *deltaWatch) *clientState {
	m := w.sub.ReturnedResources()
	if m == nil || w.typ == numTypes {
		return nil
	}
	key := mapKey(m)
	s, ok := c.clients[key]
	if !ok {
		return nil
	}
	// A subscription change has changed the map in place (go-control-plane's
	// UpdateResourceSubscriptions) before this request reached the cache.
	changed := len(w.req.GetResourceNamesSubscribe()) > 0 || len(w.req.GetResourceNamesUnsubscribe()) > 0 ||
		s.typ != w.typ || s.wildcard != w.sub.IsWildcard() || s.subscribed != len(w.sub.SubscribedResources())
	if changed || s.watched {
		delete(c.clients, key)
		return nil
	}
	if w.req.GetErrorDetail() != nil {
		s.nacked()
	}
	return s
}

// nacked notes that the client refused the last response sent: it holds none of
// its versions (see clientState.sent).
func (s *clientState) nacked() {
	for _, name := range s.sent {
		s.returned[name] = "" // held at a version that is not the one sent
	}
	s.retry = append(s.retry, s.sent...)
	s.sent = nil
}

// forgetUnsubscribedNamespaces drops from a VirtualHost subscription's versions the
// hosts of the route configurations req unsubscribes from: go-control-plane drops
// the route configuration's name only, and a client subscribing again (Envoy does
// when it recreates its VHDS subscription) would then be taken to hold its hosts.
func forgetUnsubscribedNamespaces(req *cachev3.DeltaRequest, sub cachev3.Subscription) {
	held := sub.ReturnedResources()
	for _, ns := range req.GetResourceNamesUnsubscribe() {
		if !splitByVHDS(ns) {
			continue
		}
		for name := range held {
			if n, ok := vhdsNamespace(name); ok && n == ns {
				delete(held, name)
			}
		}
	}
}

func (c *deltaCache) cancel(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.watches[id]; ok {
		delete(c.watches, id)
		c.release(w)
	}
}

// release notes that w no longer uses its client state.
func (c *deltaCache) release(w *deltaWatch) {
	if w.state != nil {
		w.state.watched = false
		w.state.idleSince = c.epoch
	}
}

// setSnapshot publishes st, whose types that are not the same typeSet as in the
// previous one changed by the names given (changed or removed), and answers the
// delta watches it has something for, in go-control-plane's ADS order.
func (c *deltaCache) setSnapshot(ctx context.Context, st state, names [numTypes][]string) error {
	if err := c.SnapshotCache.SetSnapshot(ctx, nodeGroup, &snapshot{sets: st}); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range numTypes {
		if !c.published || st.set(i) != c.current.set(i) {
			c.logs[i].add(names[i])
		}
	}
	c.current, c.published = st, true
	c.epoch++
	c.forgetIdleClients()
	for _, id := range c.watchesInADSOrder() {
		w := c.watches[id]
		sent, err := c.respond(ctx, w)
		if err != nil {
			// Only ctx ends an answer, and the snapshot is set in both caches by
			// now: Publish must not revert it. The watches left open are answered
			// by the next snapshot, from the log.
			return nil
		}
		if sent {
			delete(c.watches, id)
			c.release(w)
		}
	}
	return nil
}

// forgetIdleClients drops the states of unknown streams without a watch for longer
// than clientStateTTL snapshots: closed streams, or ones so far behind that they are
// compared in full anyway.
func (c *deltaCache) forgetIdleClients() {
	for key, s := range c.clients {
		if s.stream == (streamKey{}) && !s.watched && c.epoch-s.idleSince > clientStateTTL {
			delete(c.clients, key)
		}
	}
}

// watchesInADSOrder returns the open watches' ids in the order go-control-plane
// answers them: by type (clusters before the load assignments, listeners and
// routes that depend on them), then oldest first.
func (c *deltaCache) watchesInADSOrder() []int64 {
	ids := make([]int64, 0, len(c.watches))
	for id := range c.watches {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int64) int {
		ta := cachev3.GetResponseType(c.watches[a].req.GetTypeUrl())
		tb := cachev3.GetResponseType(c.watches[b].req.GetTypeUrl())
		if ta != tb {
			return int(ta) - int(tb)
		}
		return int(a - b)
	})
	return ids
}

// numWatches is the number of open delta watches.
func (c *deltaCache) numWatches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.watches)
}

// respond sends w the current state of its type if there is something to send, and
// reports whether it did.
func (c *deltaCache) respond(ctx context.Context, w *deltaWatch) (bool, error) {
	ts := emptyTypeSet // a type never published: no resources, no version
	var log *changeLog
	if w.typ != numTypes {
		ts, log = c.current.set(w.typ), &c.logs[w.typ]
	}
	// go-control-plane answers a wildcard subscription's first request even when
	// there is nothing to send: Envoy waits for it to complete its initialisation, as
	// it waits for the first answer to a VHDS subscription to a route configuration.
	first := (w.sub.IsWildcard() && w.req.GetResponseNonce() == "") || subscribesNamespace(w)
	names, related := c.since(w, log)
	if related && len(w.state.retry) > 0 && w.state.seq != log.seq {
		names = withRetried(names, w.state.retry)
		w.state.retry = nil
	}
	var d delta
	switch {
	case related && w.state.owned:
		d = incremental(w.sub, w.scope, w.typ, w.state.returned, ts, names)
	case related && !first && !relevant(w.sub, w.scope, w.typ, names):
		// nothing the client holds changed
	default:
		d = full(w.sub, w.scope, w.typ, ts)
	}
	if d.empty() && !first {
		if log != nil {
			// The client holds ts's resources, as the comparison found.
			if w.state == nil {
				w.state = &clientState{returned: w.sub.ReturnedResources(), typ: w.typ}
			}
			w.state.seq = log.seq
		}
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// The only exported constructor of a RawDeltaResponse with resources. It notes each
	// resource's version from d.returned, which apply updates only after the send; that
	// note is not what goes on the wire (GetDeltaDiscoveryResponse hashes each resource's
	// encoding again), so the order does not matter.
	resp := cachev3.NewTestRawDeltaResponse(w.req, ts.version, d.resources, d.removed, d.returned)
	resp.Ctx = ctx
	select {
	case w.out <- resp:
	case <-ctx.Done():
		return false, context.Canceled
	}
	switch {
	case d.versions != nil:
		// The stream reads the map it was sent only once it has cancelled this
		// watch, under mu: it is updated in place, after the send, which the
		// context can still abort.
		d.apply()
		w.state.seq, w.state.sent = log.seq, d.names()
	case log != nil:
		c.own(w, d.returned, log.seq).sent = d.names()
	}
	return true, nil
}

// withRetried returns names with those of retry it lacks, in a new slice: names
// may be a changeLog entry.
func withRetried(names, retry []string) []string {
	out := slices.Clone(names)
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		seen[n] = struct{}{}
	}
	for _, n := range retry {
		if _, dup := seen[n]; !dup {
			seen[n] = struct{}{}
			out = append(out, n)
		}
	}
	return out
}

// since returns the names that changed in w's type since the typeSet its client
// holds, false when that is not known.
func (c *deltaCache) since(w *deltaWatch, log *changeLog) ([]string, bool) {
	if w.state == nil || log == nil {
		return nil, false
	}
	return log.since(w.state.seq)
}

// own records returned, made by this cache, as the state of w's stream once sent.
func (c *deltaCache) own(w *deltaWatch, returned map[string]string, seq uint64) *clientState {
	if w.state != nil && w.state.owned {
		// The stream replaces the map it held with returned: forget it now
		// rather than after clientStateTTL snapshots.
		delete(c.clients, mapKey(w.state.returned))
	}
	s := &clientState{
		returned: returned, typ: w.typ, seq: seq, owned: true,
		wildcard: w.sub.IsWildcard(), subscribed: len(w.sub.SubscribedResources()), idleSince: c.epoch,
		stream: w.stream,
	}
	c.clients[mapKey(returned)] = s
	return s
}

// delta is a response's content: the resources to send, the names to remove, and the
// versions the client holds once it has them. versions, when not nil, are those of
// the resources sent, to set in returned, the client's own map, once sent.
type delta struct {
	resources []types.ResourceWithTTL
	removed   []string
	returned  map[string]string
	versions  []string
}

func (d delta) empty() bool { return len(d.resources) == 0 && len(d.removed) == 0 }

// names lists the names d updates and removes.
func (d delta) names() []string {
	out := make([]string, 0, len(d.resources)+len(d.removed))
	for _, r := range d.resources {
		out = append(out, cachev3.GetResourceName(r.Resource))
	}
	return append(out, d.removed...)
}

// apply updates returned to what the client holds once it has d.
func (d delta) apply() {
	for i, r := range d.resources {
		d.returned[cachev3.GetResourceName(r.Resource)] = d.versions[i]
	}
	for _, name := range d.removed {
		delete(d.returned, name)
	}
}

// relevant reports whether any of names is covered by sub, a subscription to set typ
// of a client of scope sc.
func relevant(sub cachev3.Subscription, sc scope, typ int, names []string) bool {
	return slices.ContainsFunc(names, func(name string) bool { return covers(sub, sc, typ, name) })
}

// covers reports whether sub, a subscription to set typ, covers name, as
// go-control-plane's createDeltaResponse reads a subscription, but for VHDS: a
// VirtualHost subscription to the name of a route configuration split by VHDS
// stands for every host of it ("<name>/*"), as Envoy subscribes (namespace matching).
// What a changed name means to a client is decided here only: a name outside the
// client's scope (another Gateway's listener) is never covered.
func covers(sub cachev3.Subscription, sc scope, typ int, name string) bool {
	if !sc.serves(typ, name) {
		return false
	}
	if sub.IsWildcard() {
		return true
	}
	subscribed := sub.SubscribedResources()
	if _, ok := subscribed[name]; ok {
		return true
	}
	if typ != vhostIdx {
		return false
	}
	ns, ok := vhdsNamespace(name)
	if !ok || !splitByVHDS(ns) {
		return false
	}
	_, ok = subscribed[ns]
	return ok
}

// subscribesNamespace reports whether w's request subscribes to a route
// configuration's virtual hosts, which Envoy waits for an answer to.
func subscribesNamespace(w *deltaWatch) bool {
	return w.typ == vhostIdx && slices.ContainsFunc(w.req.GetResourceNamesSubscribe(), splitByVHDS)
}

// coversNamespace reports whether sub subscribes to a route configuration's virtual
// hosts: its names then cover resources other than themselves.
func coversNamespace(sub cachev3.Subscription, typ int) bool {
	if typ != vhostIdx {
		return false
	}
	for name := range sub.SubscribedResources() {
		if splitByVHDS(name) {
			return true
		}
	}
	return false
}

// incremental is what go-control-plane's createDeltaResponse sends a client holding
// returned, the versions of a typeSet from which ts differs by names only (listed
// once each): the other names are unchanged, so comparing them would find nothing.
func incremental(sub cachev3.Subscription, sc scope, typ int, returned map[string]string, ts *typeSet, names []string) delta {
	d := delta{returned: returned, versions: []string{}}
	for _, name := range names {
		if !covers(sub, sc, typ, name) {
			continue
		}
		cur, exists := ts.set.get(name)
		prev, held := returned[name]
		switch {
		case exists && (!held || prev != cur.version):
			d.resources = append(d.resources, types.ResourceWithTTL{Resource: cur.resource})
			d.versions = append(d.versions, cur.version)
		case !exists && held:
			d.removed = append(d.removed, name)
		}
	}
	return d
}

// full is go-control-plane's createDeltaResponse: ts compared with every version the
// client holds, into a new map. sub subscribes to set typ.
func full(sub cachev3.Subscription, sc scope, typ int, ts *typeSet) delta {
	if sub.IsWildcard() || coversNamespace(sub, typ) {
		return fullByScan(sub, sc, typ, ts)
	}
	held := sub.ReturnedResources()
	var d delta
	d.returned = make(map[string]string, len(sub.SubscribedResources()))
	for name := range sub.SubscribedResources() {
		if !sc.serves(typ, name) {
			continue
		}
		prev, ok := held[name]
		if cur, exists := ts.set.get(name); exists {
			if !ok || !holds(prev, cur) {
				d.resources = append(d.resources, types.ResourceWithTTL{Resource: cur.resource})
			}
			d.returned[name] = cur.version
		} else if ok {
			d.removed = append(d.removed, name)
		}
	}
	return d
}

// fullByScan is full for a subscription whose names do not list what it covers (a
// wildcard, a VHDS namespace): every resource of ts is checked against it.
func fullByScan(sub cachev3.Subscription, sc scope, typ int, ts *typeSet) delta {
	held := sub.ReturnedResources()
	d := delta{returned: make(map[string]string, ts.set.len())}
	for name := range ts.set.names {
		if !covers(sub, sc, typ, name) {
			continue
		}
		cur, _ := ts.set.get(name)
		d.returned[name] = cur.version
		if prev, ok := held[name]; !ok || !holds(prev, cur) {
			d.resources = append(d.resources, types.ResourceWithTTL{Resource: cur.resource})
		}
	}
	for name := range held {
		if _, ok := ts.set.get(name); !ok && covers(sub, sc, typ, name) {
			d.removed = append(d.removed, name)
		}
	}
	return d
}

// holds reports whether a client holding version prev of a resource holds cur: the
// version the cache knows, or the one a client was sent, which go-control-plane
// computes from the encoding when it builds a response (a hash) and which a client
// that reconnects presents: a server that versions by identity (Server.VersionByIdentity)
// keeps other versions, and would otherwise send that client everything again.
func holds(prev string, cur versioned) bool {
	if prev == cur.version {
		return true
	}
	if prev == "" {
		return false
	}
	b, err := cur.resource.encoding()
	return err == nil && cachev3.HashResource(b) == prev
}

// changeLogLength is how many typeSets of a type a changeLog relates: a client further
// behind is compared in full.
const changeLogLength = 32

// changeLog numbers the typeSets of one type that were published and keeps the names
// that changed from each to the next, for the last changeLogLength.
type changeLog struct {
	seq     uint64     // the current typeSet's number
	entries [][]string // entries[i] changed typeSet seq-len(entries)+i into the next
}

func (l *changeLog) add(names []string) {
	l.seq++
	if len(l.entries) == changeLogLength {
		l.entries = slices.Delete(l.entries, 0, 1)
	}
	l.entries = append(l.entries, names)
}

// since returns the names changed since typeSet seq, each once, false when the log
// no longer goes back that far.
func (l *changeLog) since(seq uint64) ([]string, bool) {
	back := l.seq - seq
	if seq > l.seq || back > uint64(len(l.entries)) {
		return nil, false
	}
	entries := l.entries[uint64(len(l.entries))-back:]
	if len(entries) == 1 {
		return entries[0], true
	}
	seen := map[string]struct{}{}
	var out []string
	for _, names := range entries {
		for _, n := range names {
			if _, dup := seen[n]; !dup {
				seen[n] = struct{}{}
				out = append(out, n)
			}
		}
	}
	return out, true
}
