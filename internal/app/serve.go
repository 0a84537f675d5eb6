package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	gatewayclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/portico-dev/portico/internal/admin"
	"github.com/portico-dev/portico/internal/coalesce"
	"github.com/portico-dev/portico/internal/contourclient"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/managedtls"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/provision"
	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/source/kube"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/webhook"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
	"github.com/portico-dev/portico/internal/xds/xdstls"
)

// ServeOptions configure `portico serve`.
type ServeOptions struct {
	Config            *rest.Config
	XDSAddr           string // default 0.0.0.0:8001
	AdminAddr         string // default 0.0.0.0:8000
	IngressClassNames []string
	WatchNamespaces   []string
	// IngressStatusAddresses, when set, are written to Ingress status; otherwise the
	// load-balancer status of EnvoyService is copied.
	IngressStatusAddresses []string
	EnvoyService           types.NamespacedName
	AllowExternalName      bool
	// RootNamespaces, DisableIngress and DisablePermitInsecure: see dag.Options.
	RootNamespaces        []string
	DisablePermitInsecure bool
	// DefaultHeaders are the installation's headers policies: see dag.Options.
	DefaultHeaders dag.DefaultHeaders
	// FallbackCertificate: see dag.Options.
	FallbackCertificate *types.NamespacedName
	DisableIngress      bool
	// MaxRequestHeadersKB and MaxRequestHeaders limit request headers on Envoy and the
	// embedded proxy (0: Envoy's defaults, 60 KiB and 100); see translate.Options.
	MaxRequestHeadersKB, MaxRequestHeaders uint32
	// NumTrustedHops is how many proxies in front are trusted with X-Forwarded-For;
	// see translate.Options.
	NumTrustedHops uint32
	// Global are the installation's listener and cluster settings (translate.Options).
	Global translate.Global
	// RateLimit, when set, is the global rate limit service (translate.Options).
	RateLimit *translate.RateLimitService
	// DefaultGlobalRateLimit, when set, is the global rate limit policy of HTTPProxy
	// hosts without one (dag.Options).
	DefaultGlobalRateLimit *dag.GlobalRateLimit
	// GlobalAuthorization, when set, authorizes the requests of every HTTPProxy host
	// without an authorization of its own, and of the plain HTTP listener (dag.Options).
	GlobalAuthorization *dag.GlobalAuthorization
	// EmbeddedProxy runs the embedded proxy in-process on HTTPAddr/HTTPSAddr.
	EmbeddedProxy     bool
	HTTPAddr          string
	HTTPSAddr         string
	LeaderElection    bool
	LeaseNamespace    string
	LeaseName         string
	Identity          string
	Holdoff, MaxDelay time.Duration
	StatusWorkers     int
	Logger            *slog.Logger
	// LeaseDuration etc. use client-go's usual values unless set (tests shorten them).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// XDSTLS, when enabled, serves xDS over mutual TLS: the server presents
	// CertFile/KeyFile and requires client certificates signed by CAFile.
	XDSTLS xdstls.Files
	// XDSTLSClientCertFile and XDSTLSClientKeyFile are the client certificate the
	// embedded proxy presents to the xDS server when XDSTLS is enabled (verified
	// against XDSTLS.CAFile). When unset, the server's own pair is used, which only
	// works if that certificate allows client authentication (certgen's xds.crt does
	// not; pass its client.crt/client.key).
	XDSTLSClientCertFile, XDSTLSClientKeyFile string
	// ManagedTLS has the controller keep its own certificate authority and
	// certificates in Secrets of CertificatesNamespace (internal/managedtls): xDS is
	// served over mutual TLS with them, the data planes' client certificate is the
	// Secret managedtls.DefaultClientSecret, and the webhook (without WebhookCertDir)
	// serves a certificate for WebhookServerNames, whose CA it writes into the caBundle
	// of WebhookConfiguration.
	ManagedTLS            bool
	CertificatesNamespace string   // default portico-system
	XDSServerNames        []string // default portico.<ns>.svc, portico.<ns>.svc.cluster.local
	WebhookServerNames    []string // default portico-webhook.<ns>.svc
	WebhookConfiguration  string   // default portico
	// ManagedTLSConfig, when set, adjusts the managedtls.Config (tests: lifetimes, clock).
	ManagedTLSConfig func(*managedtls.Config)
	// XDSInsecure allows plaintext xDS on a non-loopback address (logged as a warning at
	// every start); without it such a configuration is refused.
	XDSInsecure bool
	// PprofAddr, when set, serves Go's profiles there (a loopback address only).
	PprofAddr string
	// WebhookAddr, when set, serves the validating admission webhook (HTTPS) there,
	// with the certificate in WebhookCertDir (tls.crt, tls.key; re-read when they
	// change), or with the managed one. See internal/webhook.
	WebhookAddr    string
	WebhookCertDir string
	// GatewayDataPlanes, when DataPlane is set, has the leader deploy a data plane per
	// accepted Gateway API Gateway (internal/provision); empty Namespace, XDSAddress and
	// XDSClientSecret default to DefaultGatewayNamespace, the first XDSServerNames entry
	// with XDSAddr's port, and the managed client certificate (copied there).
	// DataPlane "" leaves Gateways' data planes to the operator (portico bootstrap --gateway).
	GatewayDataPlanes provision.Options
}

func (o ServeOptions) withDefaults() ServeOptions {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.XDSAddr, "0.0.0.0:8001")
	def(&o.AdminAddr, "0.0.0.0:8000")
	def(&o.HTTPAddr, "0.0.0.0:8080")
	def(&o.HTTPSAddr, "0.0.0.0:8443")
	def(&o.LeaseNamespace, "portico-system")
	def(&o.LeaseName, "portico-leader")
	def(&o.CertificatesNamespace, "portico-system")
	def(&o.WebhookConfiguration, "portico")
	if len(o.XDSServerNames) == 0 {
		o.XDSServerNames = []string{"portico." + o.CertificatesNamespace + ".svc", "portico." + o.CertificatesNamespace + ".svc.cluster.local"}
	}
	if len(o.WebhookServerNames) == 0 {
		o.WebhookServerNames = []string{"portico-webhook." + o.CertificatesNamespace + ".svc"}
	}
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	// Holdoff and MaxDelay pace what bursts of changes call for: a change that finds the
	// controller idle is published at once; during a burst (changes following one another
	// about as fast as rebuilds finish, or faster) the configuration is rebuilt once
	// changes pause for Holdoff, and at most MaxDelay after the first waiting change
	// (coalesce.Rebuilds). Status is written once builds pause for Holdoff, at most
	// MaxDelay after the first.
	if o.Holdoff == 0 {
		o.Holdoff = 100 * time.Millisecond
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = time.Second
	}
	if o.StatusWorkers == 0 {
		o.StatusWorkers = 8
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Server is a running `portico serve`: informers → pipeline → xDS (→ embedded proxy),
// and, on the leader only, status written back to the API server.
type Server struct {
	opts     ServeOptions
	client   kubernetes.Interface
	source   *kube.Source
	pipeline *Pipeline
	proxy    *proxy.Proxy // nil without --embedded-proxy
	admin    *admin.Server
	metrics  *metrics.Pipeline
	cache    *metrics.Cache
	xdsLis   net.Listener
	xdsOpts  []grpc.ServerOption // grpc.Creds when xDS is served over mTLS
	// leader holds the context of the current term of leadership (nil when not
	// leading); it is cancelled the moment the lease is lost, stopping status writes.
	leader      atomic.Pointer[context.Context]
	writer      *status.IngressWriter
	routeWriter *status.IngressRouteWriter
	proxyWriter *status.HTTPProxyWriter
	gateways    *status.GatewayAPIWriter
	// provisioner deploys the Gateways' data planes (nil: the operator does).
	provisioner *provision.Provisioner
	events      *status.EventWriter
	// latest is the newest build for the status writer, which runs apart from
	// publishing so that slow writes never delay configuration.
	latest     atomic.Pointer[built]
	statusKick chan struct{}
	builds     chan struct{}       // a build was made: status is written once they pause
	webhook    *webhook.Server     // nil without --webhook-addr
	certs      *managedtls.Manager // nil without --managed-certificates
	profiles   *admin.Server       // nil without --pprof-addr
}

// NewServer prepares a Server; nothing runs until Run.
func NewServer(opts ServeOptions) (*Server, error) {
	opts = opts.withDefaults()
	if e := opts.EnvoyService; e.Name != "" && len(opts.WatchNamespaces) > 0 && !slices.Contains(opts.WatchNamespaces, e.Namespace) {
		// Its load-balancer status would never be seen, and every Ingress's address cleared.
		return nil, fmt.Errorf("--envoy-service %s: add namespace %q to --watch-namespaces, or set --ingress-status-address", e, e.Namespace)
	}
	if err := checkListenAddrs("http-addr", opts.HTTPAddr, "https-addr", opts.HTTPSAddr, "admin-addr", opts.AdminAddr, "xds-addr", opts.XDSAddr); err != nil {
		return nil, err
	}
	if err := checkWebhookFlags(opts); err != nil {
		return nil, err
	}
	if err := checkXDSSecurity(opts); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	contour, err := contourclient.New(opts.Config)
	if err != nil {
		return nil, err
	}
	gateway, err := gatewayclient.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	reg := admin.NewRegistry()
	s := &Server{opts: opts, client: client, builds: make(chan struct{}, 1), statusKick: make(chan struct{}, 1)}
	if opts.ManagedTLS {
		if s.certs, err = newCertificates(opts, client, reg); err != nil {
			return nil, err
		}
	}
	if opts.PprofAddr != "" {
		if s.profiles, err = admin.NewProfiling(opts.PprofAddr, opts.Logger); err != nil {
			return nil, err
		}
	}
	xdsOpts, proxyCreds, err := xdsCredentials(opts, s.certs)
	if err != nil {
		return nil, err
	}
	s.xdsOpts = xdsOpts
	if s.xdsLis, err = net.Listen("tcp", opts.XDSAddr); err != nil {
		return nil, fmt.Errorf("xDS server: %w", err)
	}
	xdsLis := s.xdsLis
	s.metrics = metrics.NewPipeline(reg)
	s.cache = metrics.NewCache(reg)
	s.source = kube.New(kube.Config{Client: client, Contour: contour, Gateway: gateway, Namespaces: opts.WatchNamespaces, Logger: opts.Logger.With("component", "kube")})
	s.pipeline = &Pipeline{
		DAG: withGatewayAPI(dag.Options{
			IngressClassNames:      opts.IngressClassNames,
			AllowExternalName:      opts.AllowExternalName,
			RootNamespaces:         opts.RootNamespaces,
			DisablePermitInsecure:  opts.DisablePermitInsecure,
			DefaultHeaders:         opts.DefaultHeaders,
			DisableIngress:         opts.DisableIngress,
			FallbackCertificate:    opts.FallbackCertificate,
			ClientCertificate:      opts.Global.UpstreamClientCertificate,
			DefaultGlobalRateLimit: opts.DefaultGlobalRateLimit,
			RateLimitService:       opts.RateLimit != nil,
			GlobalAuthorization:    opts.GlobalAuthorization,
			RateLimitExtension:     opts.RateLimit.Extension(),
		}, gatewayAddresses(opts)...),
		Translate: translate.Options{HTTPAddress: opts.HTTPAddr, HTTPSAddress: opts.HTTPSAddr, MaxRequestHeadersKB: opts.MaxRequestHeadersKB, MaxRequestHeaders: opts.MaxRequestHeaders, NumTrustedHops: opts.NumTrustedHops, RateLimit: opts.RateLimit, Global: opts.Global},
		Server:    server.New(opts.Logger.With("component", "xds"), server.MetricsCallbacks(metrics.NewXDS(reg))),
		Metrics:   s.metrics,
		Status:    status.NewLogger(opts.Logger.With("component", "status"), s.whereStatuses),
		Logger:    opts.Logger.With("component", "pipeline"),
	}
	onWrite := func(kind string) { s.metrics.StatusWrites.WithLabelValues(kind).Inc() }
	s.writer = &status.IngressWriter{Client: client, Workers: opts.StatusWorkers, Logger: opts.Logger.With("component", "status-writer"), OnWrite: onWrite}
	s.routeWriter = &status.IngressRouteWriter{Client: contour, Workers: opts.StatusWorkers, Logger: opts.Logger.With("component", "status-writer"), OnWrite: onWrite}
	s.proxyWriter = &status.HTTPProxyWriter{Client: contour, Workers: opts.StatusWorkers, Logger: opts.Logger.With("component", "status-writer"), OnWrite: onWrite}
	s.gateways = &status.GatewayAPIWriter{Client: gateway, Workers: opts.StatusWorkers, Logger: opts.Logger.With("component", "status-writer"), OnWrite: onWrite}
	s.events = status.NewEventWriter(client, opts.Logger)
	if opts.GatewayDataPlanes.DataPlane != "" {
		s.provisioner = provision.New(client, gatewayDataPlaneOptions(opts), opts.Logger.With("component", "provisioner"))
	}
	if opts.EmbeddedProxy {
		s.proxy = proxy.New(proxy.Config{
			XDSAddress:     xdsLis.Addr().String(),
			XDSCredentials: proxyCreds,
			NodeID:         "portico-embedded",
			ListenerAddrs:  map[string]string{translate.ListenerHTTP: opts.HTTPAddr, translate.ListenerHTTPS: opts.HTTPSAddr},
			Logger:         opts.Logger.With("component", "proxy"),
			Registerer:     reg,
			ProtectedAddrs: s.protectedAddrs,
		})
	}
	s.admin = admin.New(admin.Config{Addr: opts.AdminAddr, Ready: s.ready, Registry: reg, Logger: opts.Logger,
		Statuses: status.Handler(s.pipeline.Statuses)})
	if opts.WebhookAddr != "" {
		logger := opts.Logger.With("component", "webhook")
		cfg := webhook.ServerConfig{
			Addr:    opts.WebhookAddr,
			CertDir: opts.WebhookCertDir,
			Handler: webhook.NewHandler(webhook.Config{DAG: s.pipeline.DAG, Namespaces: opts.WatchNamespaces, Store: s.latestStore, Logger: logger}),
			Logger:  logger,
		}
		if opts.WebhookCertDir == "" {
			cfg.GetCertificate = s.certs.WebhookCertificate
		}
		s.webhook, err = webhook.NewServer(cfg)
		if err != nil {
			xdsLis.Close()
			return nil, fmt.Errorf("webhook: %w", err)
		}
	}
	return s, nil
}

// protectedAddrs are the addresses of this process's servers, for the embedded
// proxy never to connect to: bound, or as configured before they are. The
// proxy protects its xDS server itself.
func (s *Server) protectedAddrs() []string {
	addrs := []string{s.admin.Addr(), s.opts.AdminAddr}
	if s.webhook != nil {
		addrs = append(addrs, s.webhook.Addr(), s.opts.WebhookAddr)
	}
	if s.profiles != nil {
		addrs = append(addrs, s.profiles.Addr(), s.opts.PprofAddr)
	}
	return addrs
}

// whereStatuses says where every object's status can be read, for the status log's
// summary line.
func (s *Server) whereStatuses() string {
	return fmt.Sprintf("curl http://%s/statuses (the admin endpoint), or kubectl get ingresses,ingressroutes,httpproxies -A", s.admin.Addr())
}

// checkWebhookFlags refuses half a webhook configuration.
func checkWebhookFlags(opts ServeOptions) error {
	switch {
	case opts.WebhookAddr == "" && opts.WebhookCertDir != "":
		return errors.New("--webhook-cert-dir is set but --webhook-addr is not: set --webhook-addr (such as :9443) to serve the admission webhook")
	case opts.WebhookAddr == "":
		return nil
	case opts.WebhookCertDir == "" && !opts.ManagedTLS:
		return errors.New("--webhook-addr needs a certificate: --managed-certificates (the controller issues and rotates it), or --webhook-cert-dir, a directory holding tls.crt and tls.key (portico certgen --webhook, or a cert-manager Secret)")
	}
	return checkListenAddr("webhook-addr", opts.WebhookAddr)
}

// checkXDSSecurity refuses plaintext xDS where anything but this machine could reach
// it: the xDS stream carries the private key of every TLS Secret Portico serves.
func checkXDSSecurity(opts ServeOptions) error {
	secured := opts.ManagedTLS || opts.XDSTLS.Enabled()
	switch {
	case opts.ManagedTLS && opts.XDSTLS.Enabled():
		return errors.New("--managed-certificates and --xds-tls-cert-file/--xds-tls-key-file/--xds-tls-ca-file both secure xDS: choose one")
	case secured && opts.XDSInsecure:
		return errors.New("--xds-insecure asks for plaintext xDS, but xDS is served over TLS (--managed-certificates or --xds-tls-*-file): drop one")
	case secured || admin.IsLoopback(opts.XDSAddr):
		return nil
	case !opts.XDSInsecure:
		return fmt.Errorf("--xds-addr %s is not a loopback address, and xDS would be plaintext: anything that reaches it could read every route and the private key of every TLS Secret Portico serves. Secure it with --managed-certificates (as deploy/ does) or the --xds-tls-*-file flags, listen on a loopback address, or accept the risk with --xds-insecure", opts.XDSAddr)
	}
	opts.Logger.Warn("xDS is served in plaintext on a non-loopback address (--xds-insecure): anything that reaches it can read every route and the private key of every TLS Secret Portico serves; use --managed-certificates", "xds_addr", opts.XDSAddr)
	return nil
}

// newCertificates is the manager of the controller's own certificates (--managed-certificates).
func newCertificates(opts ServeOptions, client kubernetes.Interface, reg prometheus.Registerer) (*managedtls.Manager, error) {
	cfg := managedtls.Config{
		Client:         client,
		Namespace:      opts.CertificatesNamespace,
		XDSServerNames: opts.XDSServerNames,
		Registerer:     reg,
		Logger:         opts.Logger,
	}
	if opts.WebhookAddr != "" && opts.WebhookCertDir == "" {
		cfg.WebhookServerNames, cfg.WebhookConfiguration = opts.WebhookServerNames, opts.WebhookConfiguration
	}
	if ns := gatewayDataPlaneOptions(opts).Namespace; opts.GatewayDataPlanes.DataPlane != "" && ns != opts.CertificatesNamespace {
		// The Gateways' data planes mount the client certificate in their own namespace.
		cfg.ClientSecretNamespaces = []string{ns}
	}
	if opts.ManagedTLSConfig != nil {
		opts.ManagedTLSConfig(&cfg)
	}
	return managedtls.New(cfg)
}

// latestStore is what the admission webhook decides with: the objects of the latest
// build (nil before the first).
func (s *Server) latestStore() *store.Store {
	if b := s.latest.Load(); b != nil {
		return b.store
	}
	return nil
}

// WebhookAddr returns the admission webhook's bound address ("" when it is off or not
// started yet).
func (s *Server) WebhookAddr() string {
	if s.webhook == nil {
		return ""
	}
	return s.webhook.Addr()
}

// xdsCredentials returns the gRPC server options of the xDS server and the
// credentials of the embedded proxy: managed ones with certs, from files with
// opts.XDSTLS, and otherwise none (plaintext).
func xdsCredentials(opts ServeOptions, certs *managedtls.Manager) ([]grpc.ServerOption, credentials.TransportCredentials, error) {
	if certs != nil {
		// The embedded proxy dials the listener's own address (often 0.0.0.0), so it
		// verifies the server as one of the names its certificate carries.
		return []grpc.ServerOption{grpc.Creds(certs.ServerCredentials())}, certs.ClientCredentials(opts.XDSServerNames[0]), nil
	}
	if err := opts.XDSTLS.Validate(); err != nil {
		return nil, nil, err
	}
	if !opts.XDSTLS.Enabled() {
		if opts.XDSTLSClientCertFile != "" || opts.XDSTLSClientKeyFile != "" {
			return nil, nil, errors.New("--xds-tls-client-cert-file/--xds-tls-client-key-file need --xds-tls-cert-file, --xds-tls-key-file and --xds-tls-ca-file")
		}
		return nil, nil, nil
	}
	serverCreds, err := xdstls.ServerCredentials(opts.XDSTLS)
	if err != nil {
		return nil, nil, fmt.Errorf("xDS TLS: %w", err)
	}
	serverOpts := []grpc.ServerOption{grpc.Creds(serverCreds)}
	if !opts.EmbeddedProxy {
		return serverOpts, nil, nil
	}
	client := xdstls.Files{CertFile: opts.XDSTLSClientCertFile, KeyFile: opts.XDSTLSClientKeyFile, CAFile: opts.XDSTLS.CAFile}
	if (client.CertFile == "") != (client.KeyFile == "") {
		return nil, nil, errors.New("set both --xds-tls-client-cert-file and --xds-tls-client-key-file, or neither")
	}
	if client.CertFile == "" {
		ok, err := xdstls.AllowsClientAuth(opts.XDSTLS.CertFile)
		if err != nil {
			return nil, nil, fmt.Errorf("xDS TLS: %w", err)
		}
		if !ok {
			return nil, nil, errors.New("--embedded-proxy with xDS TLS: the server certificate does not allow client authentication; set --xds-tls-client-cert-file and --xds-tls-client-key-file (certgen's client.crt and client.key)")
		}
		client.CertFile, client.KeyFile = opts.XDSTLS.CertFile, opts.XDSTLS.KeyFile
	}
	// The embedded proxy dials the listener's own address (often 0.0.0.0), so it
	// verifies the server certificate against a name the certificate carries.
	serverName, err := xdstls.CertificateName(opts.XDSTLS.CertFile)
	if err != nil {
		return nil, nil, fmt.Errorf("xDS TLS: %w", err)
	}
	proxyCreds, err := xdstls.ClientCredentials(client, serverName)
	if err != nil {
		return nil, nil, fmt.Errorf("xDS TLS, embedded proxy: %w", err)
	}
	return serverOpts, proxyCreds, nil
}

func (s *Server) ready() (bool, string) {
	switch {
	case s.certs != nil && !s.certs.Ready():
		return false, "the xDS server's certificates have not been issued yet (see the log lines of component=certificates)"
	case !s.source.Synced():
		return false, "the Kubernetes caches have not synced yet"
	case !s.pipeline.Server.Published():
		return false, "no configuration has been built yet"
	case s.proxy != nil && !s.proxy.Ready():
		return false, "the embedded proxy has not applied a complete configuration yet"
	}
	return true, ""
}

// built is one build's inputs and outcome, as the status writer needs them.
type built struct {
	store    *store.Store
	statuses []*dag.Status
	// gateways are the data planes of the Gateways served, each to be deployed.
	gateways []*dag.Gateway
}

// Leading reports whether this replica holds the lease (and so writes status).
func (s *Server) Leading() bool {
	ctx := s.leader.Load()
	return ctx != nil && (*ctx).Err() == nil
}

// Proxy returns the embedded proxy, or nil.
func (s *Server) Proxy() *proxy.Proxy { return s.proxy }

// Admin returns the admin server.
func (s *Server) Admin() *admin.Server { return s.admin }

// XDSAddr returns the bound xDS address.
func (s *Server) XDSAddr() string { return s.xdsLis.Addr().String() }

// Run serves until ctx is done (SIGTERM), then stops everything gracefully.
func (s *Server) Run(ctx context.Context) error {
	if s.profiles != nil {
		if err := s.profiles.Start(); err != nil {
			s.xdsLis.Close()
			return fmt.Errorf("profiles (--pprof-addr): %w", err)
		}
		defer func() { _ = s.profiles.Shutdown(context.Background()) }()
	}
	if err := s.admin.Start(); err != nil {
		s.xdsLis.Close()
		return fmt.Errorf("admin endpoint: %w", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	if s.certs != nil {
		g.Go(func() error { return s.certs.Run(ctx) })
	}
	g.Go(func() error { return s.pipeline.Server.Serve(ctx, s.xdsLis, s.xdsOpts...) })
	if s.proxy != nil {
		g.Go(func() error {
			if s.certs != nil {
				if err := s.certs.WaitReady(ctx); err != nil {
					return nil // shutting down
				}
			}
			return s.proxy.Run(ctx)
		})
	}
	g.Go(func() error { return s.source.Run(ctx) })
	if s.webhook != nil {
		g.Go(func() error { return s.webhook.Run(ctx) })
	}
	g.Go(func() error {
		coalesce.Rebuilds(ctx, s.source.Changes(), s.opts.Holdoff, s.opts.MaxDelay, func() { s.rebuild(ctx) })
		return nil
	})
	g.Go(func() error {
		// Builds come at once now; status still waits for them to pause, as it did when
		// the rebuilds themselves waited: an HTTPProxy applied just before the one it
		// includes would otherwise be written invalid, then valid (and one applied just
		// before its Service get a passing warning), each state an API write.
		coalesce.Trailing(ctx, s.builds, s.opts.Holdoff, s.opts.MaxDelay, s.kickStatus)
		return nil
	})
	// The lease is released only after the status writer has stopped, so that a new
	// leader never starts while this one's last writes are still landing.
	electionCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	defer endElection()
	g.Go(func() error { return s.runLeaderElection(electionCtx) })
	g.Go(func() error {
		s.writeStatusLoop(ctx)
		endElection()
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return s.admin.Shutdown(shutdownCtx)
	})
	err := g.Wait()
	s.events.Shutdown()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// rebuild publishes a new configuration and, on the leader, writes status.
func (s *Server) rebuild(ctx context.Context) {
	if !s.source.Synced() {
		return // a partial cache would publish a configuration missing routes
	}
	snap := s.source.Snapshot()
	for kind, n := range snap.Counts() {
		s.cache.Objects.WithLabelValues(kind).Set(float64(n))
	}
	g, err := s.pipeline.Rebuild(ctx, snap)
	if err != nil {
		s.opts.Logger.Error("rebuild failed", "err", err)
	}
	s.latest.Store(&built{store: snap, statuses: g.Statuses, gateways: servedGateways(g)})
	signal(s.builds)
}

func (s *Server) kickStatus() { signal(s.statusKick) }

// signal sends on a channel of one that may already hold a value, which says the same.
func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// writeStatusLoop writes the status of the latest build whenever there is a new one or
// this replica starts leading, with the leader's context, and retries failed writes
// with backoff.
func (s *Server) writeStatusLoop(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := 500 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.statusKick:
		case <-retry.C:
		}
		leaderCtx, b := s.leader.Load(), s.latest.Load()
		if leaderCtx == nil || (*leaderCtx).Err() != nil || b == nil {
			continue
		}
		s.events.Observe(b.store, b.statuses)
		// Writes stop when leadership ends or the process shuts down, whichever is first.
		writeCtx, cancelWrites := context.WithCancel(*leaderCtx)
		stopOnShutdown := context.AfterFunc(ctx, cancelWrites)
		lb := s.loadBalancer(b.store)
		failed := s.writer.Sync(writeCtx, b.store, b.statuses, lb) +
			s.routeWriter.Sync(writeCtx, b.store, b.statuses) +
			s.proxyWriter.Sync(writeCtx, b.store, b.statuses, lb) +
			s.provisionGateways(writeCtx, b) +
			s.gateways.Sync(writeCtx, b.store, b.statuses)
		stopOnShutdown()
		cancelWrites()
		if failed > 0 {
			retry.Reset(backoff)
			backoff = min(backoff*2, 30*time.Second)
		} else {
			backoff = 500 * time.Millisecond
		}
	}
}

// loadBalancer is the address Ingresses report: the configured one, else the Envoy
// Service's load-balancer status (its namespace must be watched).
func (s *Server) loadBalancer(snap *store.Store) []networkingv1.IngressLoadBalancerIngress {
	if len(s.opts.IngressStatusAddresses) > 0 {
		return status.LoadBalancerFromAddresses(s.opts.IngressStatusAddresses)
	}
	if s.opts.EnvoyService.Name == "" {
		return nil
	}
	return status.LoadBalancerFromService(snap.Services[s.opts.EnvoyService])
}

// runLeaderElection keeps trying to lead until ctx is done. Every replica serves xDS;
// only the leader writes status, and it stops writing as soon as it loses the lease.
func (s *Server) runLeaderElection(ctx context.Context) error {
	if !s.opts.LeaderElection {
		s.lead(ctx)
		return nil
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: s.opts.LeaseNamespace, Name: s.opts.LeaseName},
		Client:     s.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: s.opts.Identity},
	}
	if !s.waitForLeaseNamespace(ctx) {
		return nil
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   s.opts.LeaseDuration,
			RenewDeadline:   s.opts.RenewDeadline,
			RetryPeriod:     s.opts.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            s.opts.LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				// client-go cancels this context when leadership ends, whatever order
				// its callbacks run in, so leadership is exactly this context's life.
				OnStartedLeading: s.lead,
				OnStoppedLeading: func() {
					s.opts.Logger.Info("not leading; not writing status", "identity", s.opts.Identity)
				},
				OnNewLeader: func(id string) {
					s.opts.Logger.Info("leader", "identity", id, "self", id == s.opts.Identity)
				},
			},
		})
	}
	return nil
}

// waitForLeaseNamespace returns once the leader election namespace exists (false when
// ctx ends first). Without it no replica can take the Lease, so no status would ever be
// written while client-go logs an error per attempt: say so once, with the fix, and wait.
// When the namespace cannot be read (RBAC without get on namespaces) election proceeds
// and reports its own errors.
func (s *Server) waitForLeaseNamespace(ctx context.Context) bool {
	ns := s.opts.LeaseNamespace
	warned := false
	for {
		_, err := s.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case err == nil:
			if warned {
				s.opts.Logger.Info("leader election namespace exists now; electing a leader", "namespace", ns)
			}
			return true
		case apierrors.IsNotFound(err):
			if !warned {
				s.opts.Logger.Error(fmt.Sprintf("leader election namespace %q does not exist: status is not written until it does; create it (kubectl create namespace %s) or set --leader-election-namespace", ns, ns), "namespace", ns)
				warned = true
			}
		case ctx.Err() != nil:
			return false
		default:
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(s.opts.RetryPeriod):
		}
	}
}

// lead holds leadership for the life of ctx: status is written with ctx, so every
// write stops when it ends.
func (s *Server) lead(ctx context.Context) {
	s.leader.Store(&ctx)
	s.opts.Logger.Info("leading; writing status", "identity", s.opts.Identity)
	s.kickStatus() // write everything once: the previous leader may have missed changes
	<-ctx.Done()
	s.leader.CompareAndSwap(&ctx, nil)
}
