// Package xdsclient is the embedded proxy's side of the xDS protocol: one
// incremental (delta) ADS stream with wildcard subscriptions to every type
// the proxy serves, ACKs and NACKs (a NACK names the resource and the field
// at fault), the versions in force kept across reconnects, reconnects with
// jittered backoff, and the Node metadata by which the proxy says what it
// serves. What the resources mean is not its business: it hands each
// response to a Sink (package proxy), whose error is the NACK.
package xdsclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	// maxXDSMessageBytes bounds one DiscoveryResponse. gRPC's 4 MiB default is
	// too small for a cluster with many Ingresses and certificates.
	MaxMessageBytes = 64 << 20

	reconnectBackoffMin = 100 * time.Millisecond
	reconnectBackoffMax = 5 * time.Second
)

// wildcard subscribes to every resource of a type. The proxy subscribes so to
// every type, RDS, EDS and SDS included: the server publishes only the route
// configurations, assignments and secrets that its listeners and clusters
// reference, and a wildcard spares the round trip of subscribing to a new name
// before its resource can arrive.
const wildcard = "*"

// VHDSMetadataKey is the Node metadata field (a bool) by which the proxy asks
// the server for VHDS: route configuration ingress_http without its virtual
// hosts, which come as VirtualHost resources, one per host, so that a one-host
// edit sends that host and not the whole configuration. The server has its
// own copy of the key (internal/xds/server); a server that knows no VHDS
// ignores it and sends the virtual hosts inline, which the proxy takes too.
const VHDSMetadataKey = "portico.io/vhds"

// The Node metadata fields by which the proxy says which listeners it serves (the
// server's own copies, with their meaning, are in internal/xds/server/scope.go).
const (
	GatewayMetadataKey      = "portico.io/gateway"
	AllListenersMetadataKey = "portico.io/all-listeners"
)

// NodeMetadata is what the proxy tells the server about itself: it takes VHDS, and
// which listeners it serves (all of them, or a Gateway's).
func NodeMetadata(allListeners bool, gateway string) *structpb.Struct {
	md := &structpb.Struct{Fields: map[string]*structpb.Value{VHDSMetadataKey: structpb.NewBoolValue(true)}}
	switch {
	case allListeners:
		md.Fields[AllListenersMetadataKey] = structpb.NewBoolValue(true)
	case gateway != "":
		md.Fields[GatewayMetadataKey] = structpb.NewStringValue(gateway)
	}
	return md
}

// Sink receives validated xDS resources. Package proxy implements it; an
// interface so that the protocol handling here does not depend on how
// resources are compiled.
type Sink interface {
	// Decode checks every resource of a response; a non-nil error is the
	// NACK reason and must name the resource and the problem.
	// removed are the names the response removes.
	Decode(typeURL string, resources []*discoveryv3.Resource, removed []string) (map[string]any, error)
	// Accept stores an accepted delta (updated resources by name, and the names
	// removed) and applies the resulting configuration if complete.
	Accept(ctx context.Context, typeURL, version string, updated map[string]any, removed []string)
	// Rejected reports a NACK, for metrics.
	Rejected(typeURL string)
}

// Client runs the incremental (delta) aggregated discovery stream,
// reconnecting with backoff.
type Client struct {
	client discoveryv3.AggregatedDiscoveryServiceClient
	node   *corev3.Node
	log    *slog.Logger
	sink   Sink

	// known holds, per type, the version of every resource in force. It
	// survives reconnects: a new stream sends it as initial_resource_versions,
	// so the server sends only what changed meanwhile. A NACKed response leaves
	// it unchanged, as it leaves the resources.
	known map[string]map[string]string
}

func NewClient(conn grpc.ClientConnInterface, nodeID string, metadata *structpb.Struct, log *slog.Logger, sink Sink) *Client {
	return &Client{
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

// Run keeps a stream open until ctx is done. The last applied configuration
// keeps being served while the server is unreachable.
func (c *Client) Run(ctx context.Context) {
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
		wait := time.NewTimer(jitter(backoff))
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-wait.C:
		}
		backoff = min(backoff*2, reconnectBackoffMax)
	}
}

type deltaStream = discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient

func (c *Client) runStream(ctx context.Context) (gotResponse bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stream, err := c.client.DeltaAggregatedResources(ctx)
	if err != nil {
		return false, fmt.Errorf("open stream: %w", err)
	}
	for i, typeURL := range SubscribedTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{
			TypeUrl:                 typeURL,
			ResourceNamesSubscribe:  []string{wildcard},
			InitialResourceVersions: c.known[typeURL],
		}
		if i == 0 {
			req.Node = c.node // the server keeps the first request's node for the stream
		}
		if err := stream.Send(req); err != nil {
			return false, fmt.Errorf("send initial %s request: %w", ShortTypeName(typeURL), err)
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
func (c *Client) handleResponse(ctx context.Context, stream deltaStream, resp *discoveryv3.DeltaDiscoveryResponse) error {
	typeURL := resp.GetTypeUrl()
	log := c.log.With("type", ShortTypeName(typeURL), "version", resp.GetSystemVersionInfo(),
		"resources", len(resp.GetResources()), "removed", len(resp.GetRemovedResources()))
	reply := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResponseNonce: resp.GetNonce()}

	decoded, err := c.sink.Decode(typeURL, resp.GetResources(), resp.GetRemovedResources())
	if err != nil {
		c.sink.Rejected(typeURL)
		reply.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		log.Warn("NACK: rejected xDS response; previous resources stay in force", "error", err)
		return send(stream, reply)
	}
	c.remember(typeURL, resp)
	// Applied before the ACK, as Envoy does: an ACK means the configuration is in
	// force (or waiting for the resources it references).
	c.sink.Accept(ctx, typeURL, resp.GetSystemVersionInfo(), decoded, resp.GetRemovedResources())
	log.Debug("ACK")
	return send(stream, reply)
}

// remember records the versions now in force after resp.
func (c *Client) remember(typeURL string, resp *discoveryv3.DeltaDiscoveryResponse) {
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
		return fmt.Errorf("send %s request: %w", ShortTypeName(req.GetTypeUrl()), err)
	}
	return nil
}

// jitter spreads reconnects of many proxies: d ± 20%.
func jitter(d time.Duration) time.Duration {
	return d + time.Duration((rand.Float64()*0.4-0.2)*float64(d))
}

// SubscribedTypes are the types the proxy subscribes to, in the order Envoy
// (and the snapshot cache) use for ADS: clusters and their endpoints before
// listeners and their routes, then the routes' virtual hosts (VHDS), secrets
// last.
var SubscribedTypes = []string{
	resourcev3.ClusterType,
	resourcev3.EndpointType,
	resourcev3.ListenerType,
	resourcev3.RouteType,
	resourcev3.VirtualHostType,
	resourcev3.SecretType,
}

func ShortTypeName(typeURL string) string {
	return typeURL[strings.LastIndex(typeURL, ".")+1:]
}
