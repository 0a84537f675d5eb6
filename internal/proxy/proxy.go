package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/portico-dev/portico/internal/proxy/accesslog"
	"github.com/portico-dev/portico/internal/proxy/filter"
	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/listener"
	"github.com/portico-dev/portico/internal/proxy/upstream"
	"github.com/portico-dev/portico/internal/proxy/xdsclient"
)

// DefaultNodeID is sent as DiscoveryRequest.node.id when Config.NodeID is empty.
const DefaultNodeID = "portico-proxy"

// Config configures a Proxy.
type Config struct {
	XDSAddress string // host:port of the ADS gRPC server (plaintext unless XDSCredentials is set)
	NodeID     string // sent in DiscoveryRequest.node.id (default "portico-proxy")
	// BindAddress, when set, maps the socket address of a listener that ListenerAddrs
	// does not name to the address to bind (`portico run` moves Gateway listeners to
	// local ports); it must be a pure function of its arguments.
	BindAddress func(listener, address string) string
	// Gateway, "namespace/name", makes this proxy the data plane of that Gateway API
	// Gateway: the server sends it that Gateway's listeners and no others. Empty: the
	// shared data plane (Ingress, IngressRoute, HTTPProxy), unless AllListeners.
	Gateway string
	// AllListeners asks for every listener, the shared ones and every Gateway's: the
	// proxy of `portico run`, one process for all of them.
	AllListeners  bool
	ListenerAddrs map[string]string     // listener name -> bind address override, e.g. {"ingress_http":"127.0.0.1:8080"}; when absent, bind the Listener's own socket address
	Logger        *slog.Logger          // structured logging; access log lines go here too (msg "access") unless AccessLogger is set
	Registerer    prometheus.Registerer // may be nil; if set register request counters/histograms (no global registry)
	// AccessLogger, when set, writes the access log lines (msg "access")
	// instead of Logger.
	AccessLogger *slog.Logger
	// LogBatcher, when set, is the sink the access log's logger writes to,
	// able to gather the lines written between Hold and Release into one
	// write (package logbatch's Writer): the access log holds it while it has
	// more lines queued, saving a write(2) per request under load. Give the
	// access log a logger of its own on it (AccessLogger), so that the
	// process's other lines do not wait in its batches.
	LogBatcher LogBatcher
	// XDSCredentials secure the connection to the ADS server (package xdstls builds
	// mutual TLS ones); nil means plaintext gRPC.
	XDSCredentials credentials.TransportCredentials
	// BindGrace is how long a listener of the first configuration may fail to bind
	// (address in use, no such address) before Run returns an error naming it; 0 means
	// DefaultBindGrace, negative retries for ever. After the proxy has been ready once,
	// bind failures are logged and retried without end.
	BindGrace time.Duration
	// ProtectedAddrs returns the addresses (host:port, as bound) of the
	// process's other servers that no route may reach: the admin endpoint, the
	// xDS server, the admission webhook. A host 0.0.0.0, :: or "" protects the
	// port on every address of this host. The proxy's own listeners and
	// XDSAddress are always protected. It is called when Run starts and whenever the proxy's
	// listeners change, from any goroutine; nil protects the listeners alone.
	// An address given with port 0 protects nothing: give servers started
	// before Run by their bound address.
	ProtectedAddrs func() []string
	// Resolver resolves the host names of STRICT_DNS and LOGICAL_DNS clusters
	// (ExternalName Services); nil means net.DefaultResolver.
	Resolver *net.Resolver
}

// LogBatcher is a log sink that writes what it is given between Hold and
// Release in as few writes as it can, no later than Release.
type LogBatcher interface {
	Hold()
	Release()
}

// Proxy is an xDS-configured HTTP(S) proxy. Create it with New and start it with Run.
type Proxy struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	// egress decides which addresses upstream connections may reach;
	// egressStale is set when the listeners changed and its protected
	// addresses must be listed again (refreshEgress).
	egress      *upstream.EgressGuard
	egressStale atomic.Bool
	// accessLog writes the access log lines of every listener off the request path.
	accessLog *accesslog.Log

	// transport is shared by every request of every configuration so that
	// upstream connection pools survive config swaps.
	transport *upstream.HTTP1Client
	// upstreams are what HTTP filters and mirrors use to reach services
	// (authorization, rate limits, JWKS); they outlive configuration swaps.
	upstreams *filterUpstreams
	// hcm is what the listeners' connection managers share.
	hcm *hcm.Env

	// store holds the last accepted resources per type. It is owned by the
	// goroutine running the ADS stream (see reconcile) and needs no lock.
	store *resourceStore
	// vhdsPending are the route tables that decode computed for the
	// VirtualHost response that accept applies next (see Proxy.decode).
	vhdsPending map[string]any
	// clusterStates keeps per-cluster load-balancing and health state across
	// config swaps, so that frequent updates do not keep resetting round
	// robin, in-flight counts or health. Only touched while compiling and
	// applying (ADS goroutine), then by shutdown.
	clusterStates map[string]*upstream.ClusterState
	// healthCheckers counts running health checker goroutines (tests watch
	// it); healthRunning is waited for at shutdown.
	healthCheckers atomic.Int64
	healthRunning  sync.WaitGroup
	// outlierRunning counts the clusters' outlier detection interval timers.
	outlierRunning sync.WaitGroup
	// routeStats are the request metrics per (listener, vhost, route) label
	// set, kept across swaps like clusterStates; statsGen numbers
	// compilations, to find those no applied snapshot uses. ADS goroutine only.
	routeStats map[hcm.RouteKey]*hcm.RouteStats
	statsGen   uint64
	// upstreamSeries are the series per Service port, shared by its
	// clusters. ADS goroutine only.
	upstreamSeries *upstream.Series

	current        atomic.Pointer[snapshot]
	appliedVersion atomic.Pointer[string]
	running        atomic.Bool

	// listeners are the sockets of the applied configuration.
	listeners *listener.Set
}

// New returns a Proxy for cfg. It does not connect or listen until Run.
func New(cfg Config) *Proxy {
	if cfg.NodeID == "" {
		cfg.NodeID = DefaultNodeID
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		cfg:           cfg,
		log:           log,
		metrics:       newMetrics(cfg.Registerer, log),
		store:         newResourceStore(),
		clusterStates: make(map[string]*upstream.ClusterState),
		routeStats:    make(map[hcm.RouteKey]*hcm.RouteStats),
	}
	p.upstreamSeries = upstream.NewSeries(p.metrics.upstream)
	accessLogger := log
	if cfg.AccessLogger != nil {
		accessLogger = cfg.AccessLogger
	}
	p.egress = upstream.NewEgressGuard(cfg.Resolver, p.metrics.upstream.DestinationsRefused, log)
	p.egressStale.Store(true)
	p.accessLog = accesslog.New(accessLogger, cfg.LogBatcher, p.metrics.accessLogDropped, accesslog.Queue)
	p.transport = upstream.NewHTTP1Client(upstream.NewTransport())
	p.upstreams = newFilterUpstreams(p)
	filterEnv := &filter.Env{Upstreams: p.upstreams, Log: log, Shared: &sync.Map{}}
	p.hcm = hcm.NewEnv(log, p.metrics.http, p.accessLog, p.transport, filterEnv)
	grace := cfg.BindGrace
	if grace == 0 {
		grace = listener.DefaultBindGrace
	}
	p.listeners = listener.NewSet(listener.SetConfig{
		Log: log, AccessLog: p.accessLog, HCM: p.hcm,
		BindTo: p.bindAddress, Grace: grace,
		Changed: func() { p.egressStale.Store(true) }, Refresh: p.refreshEgress,
	})
	return p
}

// Run connects to the ADS server (reconnecting with backoff on failure), serves
// until ctx is cancelled, then shuts the listeners down gracefully: in-flight
// requests get up to 5s to finish. It returns nil after a clean shutdown.
func (p *Proxy) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("proxy: Run called twice")
	}
	creds := p.cfg.XDSCredentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(p.cfg.XDSAddress,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(xdsclient.MaxMessageBytes)),
	)
	if err != nil {
		return err
	}
	defer conn.Close()

	p.accessLog.Start()
	p.refreshEgress(ctx) // the servers started before Run, bound by now
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	retrying := make(chan struct{})
	go func() {
		defer close(retrying)
		if err := p.listeners.RetryBinds(ctx); err != nil {
			cancel(err)
		}
	}()
	ads := xdsclient.NewClient(conn, p.cfg.NodeID, p.nodeMetadata(), p.log, xdsSink{p})
	ads.Run(ctx)
	<-retrying // no listener may be opened after shutdown

	p.shutdown()
	p.accessLog.Stop() // the drained requests' lines are written before Run returns
	p.stopHealthChecks()
	p.transport.CloseIdleConnections()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return err
	}
	return nil
}

// Ready reports whether a first complete configuration (listeners + every route
// config, cluster, assignment and secret they reference) has been applied and
// every listener of the applied configuration is bound. A listener that cannot
// be bound (address in use) is retried with backoff; until it is bound the
// proxy is not ready.
func (p *Proxy) Ready() bool { return p.listeners.IsReady() }

// AppliedVersion returns the xDS system_version_info of the newest response
// whose configuration was applied ("" before the first). With delta xDS an
// update arrives as one response per type that changed, each applied as it
// comes (if the configuration it makes is complete), so the other types of the
// same version may still be on their way; a NACKed response does not change it.
func (p *Proxy) AppliedVersion() string {
	if v := p.appliedVersion.Load(); v != nil {
		return *v
	}
	return ""
}

// ListenerAddr returns the actual bound address of a listener by name (useful
// when binding to port 0), or "" if not bound.
func (p *Proxy) ListenerAddr(name string) string {
	return p.listeners.Addr(name)
}

// bindAddress is the address a listener binds: the configured override, or
// the Listener's own socket address (as BindAddress maps it).
func (p *Proxy) bindAddress(name, address string) string {
	if a, ok := p.cfg.ListenerAddrs[name]; ok {
		return a
	}
	if p.cfg.BindAddress != nil {
		return p.cfg.BindAddress(name, address)
	}
	return address
}

// shutdown drains every listener and waits for all drains to finish, then
// closes the filters' upstream clients.
func (p *Proxy) shutdown() {
	p.listeners.Shutdown()
	p.upstreams.shutdown()
}

// NodeMetadata is what the proxy tells the xDS server about itself.
func (p *Proxy) nodeMetadata() *structpb.Struct {
	return xdsclient.NodeMetadata(p.cfg.AllListeners, p.cfg.Gateway)
}
