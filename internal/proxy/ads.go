package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	// maxXDSMessageBytes bounds one DiscoveryResponse. gRPC's 4 MiB default is
	// too small for a cluster with many Ingresses and certificates.
	maxXDSMessageBytes = 64 << 20

	reconnectBackoffMin = 100 * time.Millisecond
	reconnectBackoffMax = 5 * time.Second

	// A snapshot cache answers a NACK (which carries the previous version) by
	// sending the rejected snapshot again at once, so a naive client loops as
	// fast as the network allows. Repeated NACKs of the same version are
	// therefore delayed, growing from renackDelayMin to renackDelayMax. The
	// delay also bounds how late a corrected snapshot of that type is seen,
	// because the server cannot push that type until the NACK arrives.
	renackDelayMin = 250 * time.Millisecond
	renackDelayMax = 5 * time.Second
)

// configSink receives validated xDS responses. Implemented by *Proxy; an
// interface so that the protocol handling here does not depend on how
// resources are compiled.
type configSink interface {
	// decode checks every resource of a response; a non-nil error is the
	// NACK reason and must name the resource and the problem.
	decode(typeURL string, resources []*anypb.Any) (map[string]any, error)
	// accept stores an accepted response (replacing that type's previous
	// state-of-the-world) and applies the resulting configuration if complete.
	accept(ctx context.Context, typeURL, version string, resources map[string]any)
	// rejected reports a NACK, for metrics.
	rejected(typeURL string)
}

// adsClient runs the aggregated discovery stream, reconnecting with backoff.
type adsClient struct {
	client discoveryv3.AggregatedDiscoveryServiceClient
	node   *corev3.Node
	log    *slog.Logger
	sink   configSink

	// versions holds the last accepted version per type. It survives
	// reconnects so that a new stream starts from what is being served and
	// NACKs always name the version still in force.
	versions map[string]string
}

func newADSClient(conn grpc.ClientConnInterface, nodeID string, log *slog.Logger, sink configSink) *adsClient {
	return &adsClient{
		client: discoveryv3.NewAggregatedDiscoveryServiceClient(conn),
		node: &corev3.Node{
			Id:            nodeID,
			Cluster:       "portico",
			UserAgentName: "portico-proxy",
		},
		log:      log.With("component", "ads"),
		sink:     sink,
		versions: make(map[string]string),
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

// streamState is the per-stream protocol state.
type streamState struct {
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	sendMu sync.Mutex // Send must not be called concurrently (delayed NACKs)
	// nacked remembers, per type, the version last rejected and how often in
	// a row, to slow down the NACK loop described at renackDelayMin.
	nacked  map[string]nackRecord
	delayed sync.WaitGroup
}

type nackRecord struct {
	version string
	count   int
}

func (c *adsClient) runStream(ctx context.Context) (gotResponse bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	stream, err := c.client.StreamAggregatedResources(ctx)
	if err != nil {
		return false, fmt.Errorf("open stream: %w", err)
	}
	st := &streamState{stream: stream, nacked: make(map[string]nackRecord)}
	defer st.delayed.Wait() // after cancel (LIFO): delayed NACK goroutines exit promptly
	defer cancel()

	// Wildcard subscriptions (no resource names) for every type. A
	// go-control-plane snapshot cache in ADS mode answers these for RDS, EDS
	// and SDS too, and names would break it: it would then only answer once
	// the request lists every resource of the snapshot.
	for _, typeURL := range subscribedTypes {
		req := c.request(typeURL, c.versions[typeURL], "")
		if err := st.send(req); err != nil {
			return false, fmt.Errorf("send initial request: %w", err)
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
		if err := c.handleResponse(ctx, st, resp); err != nil {
			return gotResponse, err
		}
	}
}

// handleResponse validates one response and ACKs or NACKs it.
func (c *adsClient) handleResponse(ctx context.Context, st *streamState, resp *discoveryv3.DiscoveryResponse) error {
	typeURL := resp.GetTypeUrl()
	log := c.log.With("type", shortTypeName(typeURL), "version", resp.GetVersionInfo(), "resources", len(resp.GetResources()))

	decoded, err := c.sink.decode(typeURL, resp.GetResources())
	if err != nil {
		c.sink.rejected(typeURL)
		rec := st.nacked[typeURL]
		if rec.version == resp.GetVersionInfo() {
			rec.count++
		} else {
			rec = nackRecord{version: resp.GetVersionInfo(), count: 1}
		}
		st.nacked[typeURL] = rec
		nack := c.request(typeURL, c.versions[typeURL], resp.GetNonce())
		nack.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		if rec.count == 1 {
			log.Warn("NACK: rejected xDS response; previous resources stay in force", "error", err)
			return st.send(nack)
		}
		delay := renackDelay(rec.count)
		log.Debug("NACK again (delayed)", "error", err, "delay", delay)
		st.sendLater(ctx, nack, delay)
		return nil
	}

	delete(st.nacked, typeURL)
	c.versions[typeURL] = resp.GetVersionInfo()
	if err := st.send(c.request(typeURL, resp.GetVersionInfo(), resp.GetNonce())); err != nil {
		return err
	}
	log.Debug("ACK")
	c.sink.accept(ctx, typeURL, resp.GetVersionInfo(), decoded)
	return nil
}

func (c *adsClient) request(typeURL, version, nonce string) *discoveryv3.DiscoveryRequest {
	return &discoveryv3.DiscoveryRequest{
		Node:          c.node,
		TypeUrl:       typeURL,
		VersionInfo:   version,
		ResponseNonce: nonce,
	}
}

func (st *streamState) send(req *discoveryv3.DiscoveryRequest) error {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if err := st.stream.Send(req); err != nil {
		return fmt.Errorf("send %s request: %w", shortTypeName(req.GetTypeUrl()), err)
	}
	return nil
}

// sendLater sends req after delay unless the stream ends first. A send error
// is left for Recv to report, which ends the stream.
func (st *streamState) sendLater(ctx context.Context, req *discoveryv3.DiscoveryRequest, delay time.Duration) {
	st.delayed.Add(1)
	go func() {
		defer st.delayed.Done()
		if sleepCtx(ctx, delay) {
			_ = st.send(req)
		}
	}()
}

func renackDelay(count int) time.Duration {
	d := renackDelayMin
	for i := 2; i < count && d < renackDelayMax; i++ {
		d *= 2
	}
	return min(d, renackDelayMax)
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
