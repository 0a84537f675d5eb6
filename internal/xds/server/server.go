// Package server publishes translated resources to data planes: a go-control-plane
// snapshot cache behind an ADS gRPC server. Every Envoy and embedded proxy gets the same
// configuration, whatever node id it presents.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
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
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
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
	cache   cachev3.SnapshotCache
	logger  *slog.Logger
	version atomic.Uint64
	// mu serialises Publish so versions reach the cache in order.
	mu        sync.Mutex
	published atomic.Bool
	callbacks serverv3.Callbacks
}

// New returns a Server with an empty cache. callbacks may be nil.
func New(logger *slog.Logger, callbacks serverv3.Callbacks) *Server {
	if callbacks == nil {
		callbacks = serverv3.CallbackFuncs{}
	}
	return &Server{
		cache:     cachev3.NewSnapshotCache(true, allNodes{}, nil),
		logger:    logger,
		callbacks: callbacks,
	}
}

// Publish makes res the configuration every data plane receives, as one consistent
// snapshot, and returns its version.
func (s *Server) Publish(ctx context.Context, res *translate.Resources) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	version := strconv.FormatUint(s.version.Add(1), 10)
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{
		resource.ListenerType: res.Listeners,
		resource.RouteType:    res.Routes,
		resource.ClusterType:  res.Clusters,
		resource.EndpointType: res.Endpoints,
		resource.SecretType:   res.Secrets,
	})
	if err != nil {
		return "", fmt.Errorf("snapshot %s: %w", version, err)
	}
	if err := snap.Consistent(); err != nil {
		return "", fmt.Errorf("snapshot %s is inconsistent: %w", version, err)
	}
	if err := s.cache.SetSnapshot(ctx, nodeGroup, snap); err != nil {
		return "", fmt.Errorf("snapshot %s: %w", version, err)
	}
	s.published.Store(true)
	return version, nil
}

// Published reports whether a first snapshot has been published.
func (s *Server) Published() bool { return s.published.Load() }

// Serve answers ADS and the per-type discovery services on lis until ctx is done.
// opts are passed to grpc.NewServer; pass grpc.Creds(...) (see package xdstls) to
// serve over (mutual) TLS instead of plaintext.
func (s *Server) Serve(ctx context.Context, lis net.Listener, opts ...grpc.ServerOption) error {
	gs := grpc.NewServer(opts...)
	xds := serverv3.NewServer(ctx, s.cache, s.callbacks)
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
