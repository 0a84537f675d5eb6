package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// The xDS benchmarks publish n Ingresses (one plain-HTTP host each, so every host is in
// the "ingress_http" route configuration), then change one Ingress per iteration.

const xdsIngresses = 10000

var adsTypes = []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType, resourcev3.SecretType}

// editor changes one Ingress of a store at a time and publishes the result.
type editor struct {
	s   *store.Store
	srv *server.Server
	n   int
	// reuse passes unchanged resources to Publish as the pointers of the previous
	// translation, as an incremental translator does; last is that translation.
	reuse bool
	last  *translate.Resources
}

func newEditor(tb testing.TB, n int) *editor {
	tb.Helper()
	return &editor{s: cluster(n), srv: server.New(slog.New(slog.DiscardHandler), nil)}
}

// translate translates the store (outside the benchmark's timer).
func (e *editor) translate(tb testing.TB) *translate.Resources {
	tb.Helper()
	res, err := translate.Translate(dag.Build(e.s, dag.Options{}), translate.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if e.reuse && e.last != nil {
		reusePointers(e.last, res)
	}
	e.last = res
	return res
}

// reusePointers replaces each resource of next equal to the one of prev with the same
// name by prev's pointer.
func reusePointers(prev, next *translate.Resources) {
	pairs := [][2][]types.Resource{{prev.Listeners, next.Listeners}, {prev.Routes, next.Routes},
		{prev.Clusters, next.Clusters}, {prev.Endpoints, next.Endpoints}, {prev.Secrets, next.Secrets}}
	for _, p := range pairs {
		byName := make(map[string]types.Resource, len(p[0]))
		for _, r := range p[0] {
			byName[cachev3.GetResourceName(r)] = r
		}
		for i, r := range p[1] {
			old, ok := byName[cachev3.GetResourceName(r)]
			switch {
			case !ok:
			case proto.Equal(old, r):
				p[1][i] = old
			default:
				reuseVirtualHosts(old, r)
			}
		}
	}
}

// reuseVirtualHosts replaces each virtual host of the route configuration next equal to
// the one of prev with the same name by prev's pointer, as translate.Incremental does.
func reuseVirtualHosts(prev, next types.Resource) {
	p, ok := prev.(*routev3.RouteConfiguration)
	n, _ := next.(*routev3.RouteConfiguration)
	if !ok || n == nil {
		return
	}
	byName := make(map[string]*routev3.VirtualHost, len(p.VirtualHosts))
	for _, vh := range p.VirtualHosts {
		byName[vh.Name] = vh
	}
	for i, vh := range n.VirtualHosts {
		if old, ok := byName[vh.Name]; ok && proto.Equal(old, vh) {
			n.VirtualHosts[i] = old
		}
	}
}

// publish translates the store and publishes it, returning the version.
func (e *editor) publish(tb testing.TB) string {
	tb.Helper()
	v, err := e.srv.Publish(context.Background(), e.translate(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// edit changes the path of one Ingress's second rule (a different Ingress each time).
func (e *editor) edit() {
	ings := e.s.SortedIngresses()
	ing := ings[e.n%len(ings)].DeepCopy()
	e.n++
	p := &ing.Spec.Rules[0].HTTP.Paths[1]
	p.Path = fmt.Sprintf("/healthz-%d", e.n)
	e.s.Upsert(ing)
}

func (e *editor) serve(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.srv.Serve(ctx, ln)
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// received is one response as the client saw it.
type received struct {
	typeURL, version string
	bytes            int
}

// adsStream is a minimal ADS client that ACKs every response and reports it.
type adsStream interface {
	subscribe() error
	recvAndAck() (received, error)
}

type sotwStream struct {
	s    discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node *corev3.Node
}

func (c *sotwStream) subscribe() error {
	for _, t := range adsTypes {
		if err := c.s.Send(&discoveryv3.DiscoveryRequest{Node: c.node, TypeUrl: t}); err != nil {
			return err
		}
	}
	return nil
}

func (c *sotwStream) recvAndAck() (received, error) {
	resp, err := c.s.Recv()
	if err != nil {
		return received{}, err
	}
	ack := &discoveryv3.DiscoveryRequest{Node: c.node, TypeUrl: resp.GetTypeUrl(), VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce()}
	return received{resp.GetTypeUrl(), resp.GetVersionInfo(), proto.Size(resp)}, c.s.Send(ack)
}

type deltaStream struct {
	s    discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node *corev3.Node
	vhds bool // asks for VHDS, as the embedded proxy does
}

func (c *deltaStream) subscribe() error {
	types := adsTypes
	if c.vhds {
		types = append(slices.Clone(adsTypes), resourcev3.VirtualHostType)
	}
	for _, t := range types {
		if err := c.s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: c.node, TypeUrl: t, ResourceNamesSubscribe: []string{"*"}}); err != nil {
			return err
		}
	}
	return nil
}

func (c *deltaStream) recvAndAck() (received, error) {
	resp, err := c.s.Recv()
	if err != nil {
		return received{}, err
	}
	ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
	return received{resp.GetTypeUrl(), resp.GetSystemVersionInfo(), proto.Size(resp)}, c.s.Send(ack)
}

// openStream opens an ADS stream of protocol "sotw", "delta", or "delta-vhds" (delta,
// asking for VHDS as the embedded proxy does).
func openStream(tb testing.TB, addr, protocol string) adsStream {
	tb.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() { cancel(); conn.Close() })
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	node := &corev3.Node{Id: "bench"}
	var st adsStream
	switch protocol {
	case "sotw":
		s, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		st = &sotwStream{s: s, node: node}
	case "delta", "delta-vhds":
		s, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		vhds := protocol == "delta-vhds"
		if vhds {
			md, err := structpb.NewStruct(map[string]any{"portico.io/vhds": true})
			if err != nil {
				tb.Fatal(err)
			}
			node.Metadata = md
		}
		st = &deltaStream{s: s, node: node, vhds: vhds}
	}
	if err := st.subscribe(); err != nil {
		tb.Fatal(err)
	}
	return st
}

// bytesUntil receives (and ACKs) responses until those of typeURL of version arrive,
// the last type a one-Ingress change touches in ADS order, and returns how many
// responses and bytes that took.
func bytesUntil(tb testing.TB, st adsStream, typeURL, version string) (responses, bytes int) {
	tb.Helper()
	for {
		r, err := st.recvAndAck()
		if err != nil {
			tb.Fatal(err)
		}
		responses++
		bytes += r.bytes
		if r.typeURL == typeURL && r.version == version {
			return responses, bytes
		}
	}
}

// BenchmarkXDSOneIngressChange measures what one data plane is sent when one Ingress of
// 10,000 changes, over state-of-the-world ADS and delta ADS: bytes/change is the sum of
// proto.Size of the responses received for the change. The "-reused" modes pass the
// resources that did not change as the previous pointers, as an incremental translator
// does; the others pass a full rebuild, which the server hashes to find what changed.
// The "-identity" modes reuse too and version by identity instead of hashing, as
// `portico run` does (Server.VersionByIdentity); "delta-vhds-identity" is the client
// asking for VHDS, as the embedded proxy does: the changed host is a VirtualHost.
func BenchmarkXDSOneIngressChange(b *testing.B) {
	for _, mode := range []string{"sotw", "sotw-reused", "sotw-identity", "delta", "delta-reused", "delta-identity", "delta-vhds-identity"} {
		b.Run(mode, func(b *testing.B) {
			e := newEditor(b, xdsIngresses)
			protocol, variant := mode, ""
			if i := strings.LastIndex(mode, "-"); i > 0 {
				protocol, variant = mode[:i], mode[i+1:]
			}
			e.reuse = variant != ""
			if variant == "identity" {
				e.srv.VersionByIdentity()
			}
			last := resourcev3.RouteType
			if protocol == "delta-vhds" {
				last = resourcev3.VirtualHostType
			}
			v := e.publish(b)
			st := openStream(b, e.serve(b), protocol)
			bytesUntil(b, st, last, v)
			var responses, bytes int
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				e.edit()
				res := e.translate(b)
				b.StartTimer()
				start := time.Now()
				v, err := e.srv.Publish(context.Background(), res)
				if err != nil {
					b.Fatal(err)
				}
				n, size := bytesUntil(b, st, last, v)
				elapsed += time.Since(start)
				responses += n
				bytes += size
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/change")
			b.ReportMetric(float64(responses)/float64(b.N), "responses/change")
			b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms-publish-to-received/change")
		})
	}
}

// BenchmarkProxyApplyOneIngressChange measures the embedded proxy (over the ADS
// protocol it uses) from the publication of a one-Ingress change to that change being
// applied, at 10,000 Ingresses.
func BenchmarkProxyApplyOneIngressChange(b *testing.B) {
	for _, reuse := range []bool{false, true} {
		b.Run(fmt.Sprintf("reused=%t", reuse), func(b *testing.B) {
			benchmarkProxyApply(b, reuse)
		})
	}
	b.Run("add,reused=true", benchmarkProxyAdd)
}

// benchmarkProxyAdd adds one Ingress (a new host, cluster and endpoints) per
// iteration and times its publication until the proxy answers the new host
// from its backend: delta ADS sends its cluster, its endpoints and the
// route configuration as three responses, each applied in turn.
func benchmarkProxyAdd(b *testing.B) {
	e := newEditor(b, xdsIngresses)
	e.reuse = true
	e.publish(b)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	b.Cleanup(backend.Close)
	host, port, err := net.SplitHostPort(backend.Listener.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	backendPort, err := strconv.Atoi(port)
	if err != nil {
		b.Fatal(err)
	}
	p := runProxy(b, e)
	url := "http://" + p.ListenerAddr("ingress_http") + "/"
	client := &http.Client{Transport: &http.Transport{}}
	answered := func(i int) func() bool {
		return func() bool {
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Host = clusterAppHost(i)
			resp, err := client.Do(req)
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
	}
	i := xdsIngresses
	for b.Loop() {
		b.StopTimer()
		// The new host's endpoints are three addresses of the backend (127.0.0.1-3).
		for _, obj := range clusterApp(i, strings.TrimSuffix(host, "1"), int32(backendPort)) {
			e.s.Upsert(obj)
		}
		res := e.translate(b)
		b.StartTimer()
		if _, err := e.srv.Publish(context.Background(), res); err != nil {
			b.Fatal(err)
		}
		waitApplied(b, answered(i))
		i++
	}
}

func benchmarkProxyApply(b *testing.B, reuse bool) {
	e := newEditor(b, xdsIngresses)
	e.reuse = reuse
	e.publish(b)
	p := runProxy(b, e)
	for b.Loop() {
		b.StopTimer()
		e.edit()
		res := e.translate(b)
		b.StartTimer()
		v, err := e.srv.Publish(context.Background(), res)
		if err != nil {
			b.Fatal(err)
		}
		waitApplied(b, func() bool { return p.AppliedVersion() == v })
	}
}

// runProxy runs an embedded proxy on e's ADS server until it is ready.
func runProxy(b *testing.B, e *editor) *proxy.Proxy {
	p := proxy.New(proxy.Config{XDSAddress: e.serve(b), ListenerAddrs: map[string]string{"ingress_http": "127.0.0.1:0"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	waitApplied(b, p.Ready)
	return p
}

func waitApplied(tb testing.TB, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatal("timed out waiting for the proxy")
		}
		time.Sleep(200 * time.Microsecond)
	}
}
