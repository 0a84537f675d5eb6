// Package server publishes translated resources to data planes: a go-control-plane
// snapshot cache behind an ADS gRPC server for state-of-the-world clients, and a delta
// cache of its own (delta.go) that sends delta clients what changed. Every Envoy and
// embedded proxy gets the same configuration, whatever node id it presents, but for the
// listeners: a delta client that is a Gateway's data plane gets that Gateway's listeners
// only, and the shared data plane none of any Gateway's (scope.go). State-of-the-world
// clients are served every listener: Gateway data planes must use delta xDS, as
// `portico bootstrap` and the embedded proxy do.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// nodeGroup is the one snapshot key all nodes share.
const nodeGroup = "portico"

type allNodes struct{}

func (allNodes) ID(*corev3.Node) string { return nodeGroup }

// Server holds the current snapshot and serves it over gRPC.
type Server struct {
	cache  *deltaCache
	logger *slog.Logger
	// mu serialises Publish so versions reach the cache in order, and guards version,
	// current and refs.
	mu sync.Mutex
	// version numbers the snapshots set; a type's version is the number of the one
	// that last changed it.
	version uint64
	// current is the last published state; the next Publish is compared with it.
	current state
	// refs follow the references that must resolve in a consistent snapshot.
	refs      []*refIndex
	published atomic.Bool
	callbacks serverv3.Callbacks
	// identityVersions: see VersionByIdentity.
	identityVersions bool
	// vhds derives what VHDS clients are served from the route configurations.
	vhds *vhdsView
}

// VersionByIdentity tells the server that its publisher passes a resource whose content
// did not change as the same pointer (translate.Incremental does): a resource under a
// new pointer is then taken as changed and versioned by the publish, without marshalling
// and hashing it, on every change. A data plane that reconnects presents the versions
// it was sent, which are hashes (go-control-plane's, of each resource's encoding): those
// are then compared by hashing what the cache holds (see holds), once per reconnect, so
// it is not sent again what it has, after a restart of the controller too. Call it
// before the first Publish.
func (s *Server) VersionByIdentity() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.identityVersions = true
}

// New returns a Server with an empty cache. callbacks may be nil.
func New(logger *slog.Logger, callbacks serverv3.Callbacks) *Server {
	if callbacks == nil {
		callbacks = serverv3.CallbackFuncs{}
	}
	return &Server{
		cache:     newDeltaCache(),
		logger:    logger,
		callbacks: callbacks,
		refs:      []*refIndex{newRefIndex(clusterIdx, endpointIdx), newRefIndex(listenerIdx, routeIdx)},
		vhds:      newVHDSView(),
	}
}

// deferredRemovals are the types whose removed resources are withdrawn in a second
// snapshot, after the listeners and routes that stopped using them have been sent:
// Envoy's make-before-break order, so no request meets a route to a cluster (or a
// listener to a secret) that is already gone. The server pushes a type only once the
// client has ACKed its previous response of that type, so a client still busy with
// route configurations when both snapshots are set can get the removal first (the
// embedded proxy then keeps its previous configuration until the routes arrive; Envoy
// answers 503 for a moment on the routes to the removed cluster).
var deferredRemovals = []int{clusterIdx, endpointIdx, secretIdx}

// Publish makes res the configuration every data plane receives, as one consistent
// snapshot, and returns its version. res is the full set each time; what is sent to
// a delta client is what changed since the previous Publish. A resource passed as the
// same pointer as before is taken as unchanged; any other one is compared by the hash
// of its deterministic marshalling, so the cost follows the change, not the number of
// resources, when unchanged resources are reused. Published resources must not be
// modified afterwards.
func (s *Server) Publish(ctx context.Context, res *translate.Resources) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	version := s.version + 1
	next, diffs, revert, err := s.nextState(res, strconv.FormatUint(version, 10))
	if err != nil {
		return "", err
	}
	changes := changedNames(diffs)
	if interim, ok := withDeferredRemovals(&s.current, &next, diffs); ok {
		interimChanges, finalChanges := splitDeferred(diffs, changes)
		if err := s.setSnapshot(ctx, interim, interimChanges); err != nil {
			revert()
			return "", err
		}
		// The removals come with a version of their own, after the interim one.
		version++
		for _, i := range deferredRemovals {
			if len(diffs[i].removed) > 0 {
				next[i] = next[i].restamped(strconv.FormatUint(version, 10))
			}
		}
		changes = finalChanges
	}
	if err := s.setSnapshot(ctx, next, changes); err != nil {
		revert()
		return "", err
	}
	s.version = version
	s.current = next
	s.published.Store(true)
	return strconv.FormatUint(version, 10), nil
}

// nextState computes the state holding res and what changed per type, and checks
// that it is consistent: every EDS and RDS resource referenced, every reference
// resolved (as go-control-plane's Snapshot.Consistent requires for ADS).
// revert undoes what nextState recorded, for a state that is not published after all.
func (s *Server) nextState(res *translate.Resources, version string) (next state, diffs [numTypes]diff, revert func(), err error) {
	items := inputs(res)
	vhds, shells, hosts := s.vhds.derive(res.Routes)
	items[vhdsRouteIdx] = shells
	for i := range numTypes {
		var ts *typeSet
		var d diff
		var err error
		if i == vhostIdx {
			ts, d, err = s.current.set(i).nextByDiff(hosts.changed, hosts.removed, version, s.identityVersions)
		} else {
			ts, d, err = s.current.set(i).next(items[i], version, s.identityVersions)
		}
		if err != nil {
			return state{}, diffs, nil, err
		}
		next[i], diffs[i] = ts, d
	}
	var reverts []func()
	revert = func() {
		for _, r := range slices.Backward(reverts) {
			r()
		}
	}
	for _, x := range s.refs {
		r, err := x.update(diffs, &next)
		if err != nil {
			revert()
			return state{}, diffs, nil, fmt.Errorf("inconsistent configuration: %w", err)
		}
		reverts = append(reverts, r)
	}
	prevView := s.vhds
	s.vhds = vhds
	reverts = append(reverts, func() { s.vhds = prevView })
	return next, diffs, revert, nil
}

// withDeferredRemovals returns next with the deferredRemovals types' removed resources
// still present, when there are any.
func withDeferredRemovals(prev, next *state, diffs [numTypes]diff) (state, bool) {
	interim := *next
	deferred := false
	for _, i := range deferredRemovals {
		switch {
		case len(diffs[i].removed) == 0:
		case len(diffs[i].changed) == 0:
			interim[i] = prev.set(i) // only removals: the interim is the previous set
			deferred = true
		default:
			interim[i] = next.set(i).restore(prev.set(i), diffs[i].removed)
			deferred = true
		}
	}
	return interim, deferred
}

// changedNames lists, per type, the names diffs changed, then those it removed, in that
// order: splitDeferred cuts the list between the two.
func changedNames(diffs [numTypes]diff) [numTypes][]string {
	var out [numTypes][]string
	for i, d := range diffs {
		names := make([]string, 0, len(d.changed)+len(d.removed))
		for _, r := range d.changed {
			names = append(names, cachev3.GetResourceName(r))
		}
		out[i] = append(names, d.removed...)
	}
	return out
}

// splitDeferred returns the names that change from the previous snapshot to the
// interim one, and from the interim one to the next (see withDeferredRemovals): the
// deferredRemovals types' removals come with the second.
func splitDeferred(diffs [numTypes]diff, changes [numTypes][]string) (interim, final [numTypes][]string) {
	interim = changes
	for _, i := range deferredRemovals {
		if len(diffs[i].removed) > 0 {
			interim[i] = changes[i][:len(diffs[i].changed)]
			final[i] = diffs[i].removed
		}
	}
	return interim, final
}

// setSnapshot sets st, which differs from the previous snapshot set by the names
// given per type.
func (s *Server) setSnapshot(ctx context.Context, st state, changes [numTypes][]string) error {
	if err := s.cache.setSnapshot(ctx, st, changes); err != nil {
		return fmt.Errorf("set snapshot: %w", err)
	}
	return nil
}

// Published reports whether a first snapshot has been published.
func (s *Server) Published() bool { return s.published.Load() }

// Serve answers ADS and the per-type discovery services on lis until ctx is done.
// opts are passed to grpc.NewServer; pass grpc.Creds(...) (see package xdstls) to
// serve over (mutual) TLS instead of plaintext.
func (s *Server) Serve(ctx context.Context, lis net.Listener, opts ...grpc.ServerOption) error {
	gs := grpc.NewServer(opts...)
	xds := serverv3.NewServer(ctx, s.cache, s.cache.callbacks(s.callbacks))
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(gs, xds)
	routeservice.RegisterRouteDiscoveryServiceServer(gs, xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(gs, xds)
	secretservice.RegisterSecretDiscoveryServiceServer(gs, xds)
	go func() {
		<-ctx.Done()
		gs.Stop()
	}()
	s.logger.Info("xDS server listening", "addr", lis.Addr().String())
	if err := gs.Serve(lis); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
