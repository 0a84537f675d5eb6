package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/admin"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// manifestDebounce is how long run waits after the last file event before reloading:
// long enough for an editor's save (a temporary file written, then renamed over the
// original; or the file truncated and written again) to land in one reload, short enough
// not to dominate an edit's latency. On this project's loaded two-core machine no save
// was seen split with 2 ms or more, about one in a hundred with 1 ms; 10 ms leaves a
// wide margin. See docs/run-mode.md.
const manifestDebounce = 10 * time.Millisecond

// RunOptions configure `portico run`.
type RunOptions struct {
	ManifestDir       string
	HTTPAddr          string // default 127.0.0.1:8080
	HTTPSAddr         string // default 127.0.0.1:8443
	AdminAddr         string // default 127.0.0.1:8090; "" after defaulting never happens
	XDSAddr           string // where the in-process xDS server listens; default an ephemeral loopback port
	IngressClassNames []string
	// AllowExternalName lets routes use ExternalName Services (see dag.Options).
	AllowExternalName bool
	// RootNamespaces, DisableIngress and DisablePermitInsecure: see dag.Options.
	RootNamespaces        []string
	DisablePermitInsecure bool
	// DefaultHeaders are the installation's headers policies: see dag.Options.
	DefaultHeaders dag.DefaultHeaders
	// FallbackCertificate: see dag.Options.
	FallbackCertificate *types.NamespacedName
	DisableIngress      bool
	Logger              *slog.Logger
	// AccessLogger writes the embedded proxy's access log (nil: Logger), and
	// LogBatcher is the sink it writes to if that can batch (see proxy.Config);
	// nil writes an access log line at a time.
	AccessLogger *slog.Logger
	LogBatcher   proxy.LogBatcher
	// MaxRequestHeadersKB and MaxRequestHeaders limit request headers (0: Envoy's
	// defaults, 60 KiB and 100); see translate.Options.
	MaxRequestHeadersKB, MaxRequestHeaders uint32
	// NumTrustedHops is how many proxies in front are trusted with X-Forwarded-For;
	// see translate.Options.
	NumTrustedHops uint32
	// PprofAddr, when set, serves Go's profiles there (a loopback address only).
	PprofAddr string
	// Resolver resolves ExternalName Services' names (nil: the system's); tests
	// point it at a DNS server of their own.
	Resolver *net.Resolver
	// StateFile is where ages and last good versions are kept across restarts (see
	// internal/runstate); "" keeps none.
	StateFile string
	// GatewayHost and GatewayPortOffset place the listeners of Gateway API Gateways on
	// this machine: a listener of port P is served on GatewayHost:P+GatewayPortOffset
	// (GatewayLocalPort). GatewayHost defaults to the host of HTTPAddr; the command line
	// defaults the offset to DefaultGatewayPortOffset (0 serves each listener's own port).
	GatewayHost       string
	GatewayPortOffset int
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
}

func (o RunOptions) withDefaults() RunOptions {
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:8080"
	}
	if o.HTTPSAddr == "" {
		o.HTTPSAddr = "127.0.0.1:8443"
	}
	if o.AdminAddr == "" {
		o.AdminAddr = "127.0.0.1:8090"
	}
	if o.XDSAddr == "" {
		o.XDSAddr = "127.0.0.1:0"
	}
	if o.GatewayHost == "" {
		o.GatewayHost = "127.0.0.1"
		if host, _, err := net.SplitHostPort(o.HTTPAddr); err == nil && host != "" {
			o.GatewayHost = host
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Runner is a running `portico run`: manifests → pipeline → xDS → embedded proxy.
type Runner struct {
	opts     RunOptions
	pipeline *Pipeline
	proxy    *proxy.Proxy
	admin    *admin.Server
	profiles *admin.Server // nil without PprofAddr
	xdsLis   net.Listener
}

// NewRunner prepares a Runner; nothing listens until Run.
func NewRunner(opts RunOptions) (*Runner, error) {
	opts = opts.withDefaults()
	if err := checkListenAddrs("http-addr", opts.HTTPAddr, "https-addr", opts.HTTPSAddr, "admin-addr", opts.AdminAddr, "xds-addr", opts.XDSAddr); err != nil {
		return nil, err
	}
	var profiles *admin.Server
	if opts.PprofAddr != "" {
		var err error
		if profiles, err = admin.NewProfiling(opts.PprofAddr, opts.Logger); err != nil {
			return nil, err
		}
	}
	reg := admin.NewRegistry()
	xdsLis, err := net.Listen("tcp", opts.XDSAddr)
	if err != nil {
		return nil, fmt.Errorf("xDS server: %w", err)
	}
	srv := server.New(opts.Logger.With("component", "xds"), server.MetricsCallbacks(metrics.NewXDS(reg)))
	r := &Runner{opts: opts, xdsLis: xdsLis, profiles: profiles}
	r.pipeline = &Pipeline{
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
		}, localAddress(opts.GatewayHost)),
		Translate: translate.Options{HTTPAddress: opts.HTTPAddr, HTTPSAddress: opts.HTTPSAddr, HTTPSRedirectPort: redirectPort(opts.HTTPSAddr),
			MaxRequestHeadersKB: opts.MaxRequestHeadersKB, MaxRequestHeaders: opts.MaxRequestHeaders, NumTrustedHops: opts.NumTrustedHops, RateLimit: opts.RateLimit, Global: opts.Global},
		Server:    srv,
		Metrics:   metrics.NewPipeline(reg),
		Status:    status.NewLogger(opts.Logger.With("component", "status"), r.whereStatuses),
		Logger:    opts.Logger.With("component", "pipeline"),
		LastValid: NewLastValid(opts.Logger.With("component", "pipeline")),
	}
	var accessLogger *slog.Logger // nil: the proxy's Logger writes its access log
	if opts.AccessLogger != nil {
		accessLogger = opts.AccessLogger.With("component", "proxy")
	}
	r.proxy = proxy.New(proxy.Config{
		XDSAddress: xdsLis.Addr().String(),
		NodeID:     "portico-run",
		// One process serves the shared listeners and every Gateway's.
		AllListeners: true,
		ListenerAddrs: map[string]string{
			translate.ListenerHTTP:  opts.HTTPAddr,
			translate.ListenerHTTPS: opts.HTTPSAddr,
		},
		BindAddress:  gatewayBindAddress(opts.GatewayHost, opts.GatewayPortOffset),
		Logger:       opts.Logger.With("component", "proxy"),
		AccessLogger: accessLogger,
		LogBatcher:   opts.LogBatcher,
		Registerer:   reg,
		// Asked once the admin endpoint is bound (Run starts it first); the
		// proxy protects its xDS server itself.
		ProtectedAddrs: r.protectedAddrs,
		Resolver:       opts.Resolver,
	})
	r.admin = admin.New(admin.Config{Addr: opts.AdminAddr, Ready: r.ready, Registry: reg, Logger: opts.Logger,
		Statuses: status.Handler(r.pipeline.Statuses)})
	return r, nil
}

// protectedAddrs are the addresses of this process's servers, for the embedded proxy
// never to connect to (a literal 127.0.0.1 endpoint is otherwise allowed in run).
func (r *Runner) protectedAddrs() []string {
	addrs := []string{r.admin.Addr(), r.opts.AdminAddr}
	if r.profiles != nil {
		addrs = append(addrs, r.profiles.Addr(), r.opts.PprofAddr)
	}
	return addrs
}

// whereStatuses says where every object's status can be read, for the status log's
// summary line.
func (r *Runner) whereStatuses() string {
	return fmt.Sprintf("portico check %s, or curl http://%s/statuses", r.opts.ManifestDir, r.admin.Addr())
}

func (r *Runner) ready() (bool, string) {
	if !r.pipeline.Server.Published() {
		return false, "no configuration has been built from the manifests yet"
	}
	if !r.proxy.Ready() {
		return false, "the embedded proxy has not applied a complete configuration yet"
	}
	return true, ""
}

// Proxy returns the embedded proxy (for bound addresses and readiness).
func (r *Runner) Proxy() *proxy.Proxy { return r.proxy }

// Admin returns the admin server.
func (r *Runner) Admin() *admin.Server { return r.admin }

// Run serves until ctx is done.
func (r *Runner) Run(ctx context.Context) error {
	log := r.opts.Logger
	if r.profiles != nil {
		if err := r.profiles.Start(); err != nil {
			r.xdsLis.Close()
			return fmt.Errorf("profiles (--pprof-addr): %w", err)
		}
		defer func() { _ = r.profiles.Shutdown(context.Background()) }()
	}
	if err := r.admin.Start(); err != nil {
		r.xdsLis.Close()
		return fmt.Errorf("admin endpoint: %w", err)
	}
	mem, saver := r.openState()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.pipeline.Server.Serve(ctx, r.xdsLis) })
	g.Go(func() error { return r.proxy.Run(ctx) })
	if saver != nil {
		g.Go(func() error { saver.Run(ctx); return nil })
	}
	g.Go(func() error {
		// One store for the life of the Runner, brought up to date by each reload's
		// changes, as the informers do in serve.
		st := store.New()
		first := true
		problems := &problemLog{log: log}
		return manifest.WatchChangesFrom(ctx, r.opts.ManifestDir, manifestDebounce, log.With("component", "manifests"), mem, func(res *manifest.Result) {
			defer r.noteState(saver, res)
			problems.observe(res.Problems)
			// A reload that changed no object (a file touched, a broken edit whose
			// last good version stays) leaves the configuration as it is.
			if !first && len(res.Changes) == 0 {
				return
			}
			first = false
			applyChanges(st, res.Changes)
			if _, err := r.pipeline.Rebuild(ctx, st); err != nil {
				log.Error("rebuild failed", "err", err)
			}
		})
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return r.admin.Shutdown(shutdownCtx)
	})
	err := g.Wait()
	if saver != nil {
		saver.Flush() // what the last reloads noted
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// applyChanges brings s up to date with one reload of the manifests.
func applyChanges(s *store.Store, changes []manifest.Change) {
	for _, c := range changes {
		if c.Old != nil && (c.New == nil || refiled(c.Old, c.New)) {
			s.Delete(c.Old)
		}
		if c.New != nil {
			s.Upsert(c.New)
		}
	}
}

// refiled reports whether the store keeps the new version of an object under another key
// than the old one: an EndpointSlice is filed under its Service, named by a label.
func refiled(old, updated runtime.Object) bool {
	o, ok := old.(*discoveryv1.EndpointSlice)
	u, ok2 := updated.(*discoveryv1.EndpointSlice)
	return ok && ok2 && o.Labels[discoveryv1.LabelServiceName] != u.Labels[discoveryv1.LabelServiceName]
}

// redirectPort is the port plain-HTTP requests are redirected to: the HTTPS listener's
// own port, since in run mode nothing maps 443 to it. 443 itself is left out of URLs.
func redirectPort(httpsAddr string) uint32 {
	_, port, err := net.SplitHostPort(httpsAddr)
	if err != nil {
		return 0
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 443 {
		return 0
	}
	return uint32(p)
}
