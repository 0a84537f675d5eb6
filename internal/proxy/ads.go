package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// maxXDSMessageBytes bounds one DiscoveryResponse. gRPC's 4 MiB default is
	// too small for a cluster with many Ingresses and certificates.
	maxXDSMessageBytes = 64 << 20

	reconnectBackoffMin = 100 * time.Millisecond
	reconnectBackoffMax = 5 * time.Second
)

// wildcard subscribes to every resource of a type. The proxy subscribes so to
// every type, RDS, EDS and SDS included: the server publishes only the route
// configurations, assignments and secrets that its listeners and clusters
// reference, and a wildcard spares the round trip of subscribing to a new name
// before its resource can arrive.
const wildcard = "*"

// vhdsMetadataKey is the Node metadata field (a bool) by which the proxy asks
// the server for VHDS: route configuration ingress_http without its virtual
// hosts, which come as VirtualHost resources, one per host, so that a one-host
// edit sends that host and not the whole configuration. The server has its
// own copy of the key (internal/xds/server); a server that knows no VHDS
// ignores it and sends the virtual hosts inline, which the proxy takes too.
const vhdsMetadataKey = "portico.io/vhds"

// The Node metadata fields by which the proxy says which listeners it serves (the
// server's own copies, with their meaning, are in internal/xds/server/scope.go).
const (
	gatewayMetadataKey      = "portico.io/gateway"
	allListenersMetadataKey = "portico.io/all-listeners"
)

// nodeMetadata is what the proxy tells the server about itself: it takes VHDS, and
// which listeners it serves.
func (p *Proxy) nodeMetadata() *structpb.Struct {
	md := &structpb.Struct{Fields: map[string]*structpb.Value{vhdsMetadataKey: structpb.NewBoolValue(true)}}
	switch {
	case p.cfg.AllListeners:
		md.Fields[allListenersMetadataKey] = structpb.NewBoolValue(true)
	case p.cfg.Gateway != "":
		md.Fields[gatewayMetadataKey] = structpb.NewStringValue(p.cfg.Gateway)
	}
	return md
}

// configSink receives validated xDS resources. Implemented by *Proxy; an
// interface so that the protocol handling here does not depend on how
// resources are compiled.
type configSink interface {
	// decode checks every resource of a response; a non-nil error is the
	// NACK reason and must name the resource and the problem.
	// removed are the names the response removes.
	decode(typeURL string, resources []*discoveryv3.Resource, removed []string) (map[string]any, error)
	// accept stores an accepted delta (updated resources by name, and the names
	// removed) and applies the resulting configuration if complete.
	accept(ctx context.Context, typeURL, version string, updated map[string]any, removed []string)
	// rejected reports a NACK, for metrics.
	rejected(typeURL string)
}

// adsClient runs the incremental (delta) aggregated discovery stream,
// reconnecting with backoff.
type adsClient struct {
	client discoveryv3.AggregatedDiscoveryServiceClient
	node   *corev3.Node
	log    *slog.Logger
	sink   configSink

	// known holds, per type, the version of every resource in force. It
	// survives reconnects: a new stream sends it as initial_resource_versions,
	// so the server sends only what changed meanwhile. A NACKed response leaves
	// it unchanged, as it leaves the resources.
	known map[string]map[string]string
}

func newADSClient(conn grpc.ClientConnInterface, nodeID string, metadata *structpb.Struct, log *slog.Logger, sink configSink) *adsClient {
	return &adsClient{
		client: discoveryv3.NewAggregatedDiscoveryServiceClient(conn),
		node: &corev3.Node{
			Id:            nodeID,
			Cluster:       "portico",
			UserAgentName: "portico-proxy",
			Metadata:      metadata,
		},
		log:   log,
		sink:  sink,
		known: make(map[string]map[string]string),
	}
}

// run keeps a stream open until ctx is done. The last applied configuration
// keeps being served while the server is unreachable.
func (c *adsClient) run(ctx context.Context) {
	backoff := reconnectBackoffMin
	for {
		gotResponse, err := c.runStream(ctx)
		if ctx.Err() != nil {
			return
		}
		if gotResponse {
			backoff = reconnectBackoffMin
		}
		c.log.Warn("xDS stream ended; reconnecting", "error", err, "backoff", backoff)
		if !sleepCtx(ctx, jitter(backoff)) {
			return
		}
		backoff = min(backoff*2, reconnectBackoffMax)
	}
}

type deltaStream = discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient

func (c *adsClient) runStream(ctx context.Context) (gotResponse bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stream, err := c.client.DeltaAggregatedResources(ctx)
	if err != nil {
		return false, fmt.Errorf("open stream: %w", err)
	}
	for i, typeURL := range subscribedTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                 typeURL,
			ResourceNamesSubscribe:  []string{wildcard},
			InitialResourceVersions: c.known[typeURL],
		}
		if i == 0 {
			req.Node = c.node // the server keeps the first request's node for the stream
		}
		if err := stream.Send(req); err != nil {
			return false, fmt.Errorf("send initial %s request: %w", shortTypeName(typeURL), err)
		}
	}
	c.log.Info("xDS stream open")

	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("server closed the stream")
			}
			return gotResponse, err
		}
		gotResponse = true
		if err := c.handleResponse(ctx, stream, resp); err != nil {
			return gotResponse, err
		}
	}
}

// handleResponse validates one response, applies it if valid, then ACKs it, or
// NACKs it naming the resource at fault. A NACK rejects the whole response: the
// versions of its resources that were in force stay in force.
func (c *adsClient) handleResponse(ctx context.Context, stream deltaStream, resp *discoveryv3.DeltaDiscoveryResponse) error {
	typeURL := resp.GetTypeUrl()
	log := c.log.With("type", shortTypeName(typeURL), "version", resp.GetSystemVersionInfo(),
		"resources", len(resp.GetResources()), "removed", len(resp.GetRemovedResources()))
	reply := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResponseNonce: resp.GetNonce()}

	decoded, err := c.sink.decode(typeURL, resp.GetResources(), resp.GetRemovedResources())
	if err != nil {
		c.sink.rejected(typeURL)
		reply.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		log.Warn("NACK: rejected xDS response; previous resources stay in force", "error", err)
		return send(stream, reply)
	}
	c.remember(typeURL, resp)
	// Applied before the ACK, as Envoy does: an ACK means the configuration is in
	// force (or waiting for the resources it references).
	c.sink.accept(ctx, typeURL, resp.GetSystemVersionInfo(), decoded, resp.GetRemovedResources())
	log.Debug("ACK")
	return send(stream, reply)
}

// remember records the versions now in force after resp.
func (c *adsClient) remember(typeURL string, resp *discoveryv3.DeltaDiscoveryResponse) {
	known := c.known[typeURL]
	if known == nil {
		known = make(map[string]string, len(resp.GetResources()))
		c.known[typeURL] = known
	}
	for _, r := range resp.GetResources() {
		known[r.GetName()] = r.GetVersion()
	}
	for _, name := range resp.GetRemovedResources() {
		delete(known, name)
	}
}

func send(stream deltaStream, req *discoveryv3.DeltaDiscoveryRequest) error {
	if err := stream.Send(req); err != nil {
		return fmt.Errorf("send %s request: %w", shortTypeName(req.GetTypeUrl()), err)
	}
	return nil
}

// jitter spreads reconnects of many proxies: d ± 20%.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// sleepCtx sleeps for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
