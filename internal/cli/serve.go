package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
)

func serveCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("serve", stderr)
	withUsage(fs, "serve [flags]")
	var o app.ServeOptions
	configFile := fs.String("config", "", "YAML file of settings, keyed by flag name or laid out as Contour's configuration file (flags on the command line win; docs/contour-config.md)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: in-cluster configuration)")
	fs.StringVar(&o.XDSAddr, "xds-addr", "0.0.0.0:8001", "address of the xDS (ADS) gRPC server")
	fs.StringVar(&o.AdminAddr, "admin-addr", "0.0.0.0:8000", "address of the admin endpoint (/healthz, /readyz, /metrics, /statuses; no profiles: see --pprof-addr)")
	classes := fs.String("ingress-class-name", dag.DefaultIngressClassName, "the ingress classes Portico serves, comma-separated (as Contour's: contour,team1)")
	watch := fs.String("watch-namespaces", "", "comma-separated namespaces to watch (default: all)")
	roots := fs.String("root-namespaces", "", "comma-separated namespaces where root IngressRoutes and HTTPProxies (those with a virtualhost) may live (default: any)")
	fallback := fs.String("fallback-certificate", "", "NAMESPACE/NAME of a kubernetes.io/tls Secret presented to HTTPS clients that send no server name (or an unknown one), for the HTTPProxies with tls.enableFallbackCertificate")
	fs.BoolVar(&o.DisableIngress, "disable-ingress", false, "ignore Ingress objects (serve IngressRoutes and HTTPProxies only)")
	fs.BoolVar(&o.DisablePermitInsecure, "disable-permit-insecure", false, "ignore HTTPProxy routes' permitInsecure: plain HTTP requests to TLS hosts are all redirected to HTTPS")
	statusAddr := fs.String("ingress-status-address", "", "comma-separated IPs or host names written to Ingress status.loadBalancer")
	envoySvc := fs.String("envoy-service", "", "namespace/name of the Envoy Service whose load-balancer status Ingresses report (when --ingress-status-address is unset)")
	fs.BoolVar(&o.AllowExternalName, "enable-external-name-services", false, "route to Services of type ExternalName (never to loopback or other namespaces)")
	fs.BoolVar(&o.EmbeddedProxy, "embedded-proxy", false, "run the embedded proxy in-process (single-node installs, tests)")
	fs.StringVar(&o.HTTPAddr, "http-addr", "0.0.0.0:8080", "HTTP listener address (Envoy's, or the embedded proxy's)")
	fs.StringVar(&o.HTTPSAddr, "https-addr", "0.0.0.0:8443", "HTTPS listener address")
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "elect one status-writing leader among replicas with a Lease")
	fs.StringVar(&o.LeaseNamespace, "leader-election-namespace", "portico-system", "namespace of the leader election Lease")
	fs.StringVar(&o.LeaseName, "leader-election-name", "portico-leader", "name of the leader election Lease")
	qps := fs.Float64("kube-api-qps", 100, "sustained requests per second to the Kubernetes API (status writes at scale need more than client-go's default of 5)")
	burst := fs.Int("kube-api-burst", 200, "burst of requests to the Kubernetes API")
	fs.StringVar(&o.XDSTLS.CertFile, "xds-tls-cert-file", "", "serve xDS over mutual TLS with this certificate (with --xds-tls-key-file and --xds-tls-ca-file)")
	fs.StringVar(&o.XDSTLS.KeyFile, "xds-tls-key-file", "", "private key of --xds-tls-cert-file")
	fs.StringVar(&o.XDSTLS.CAFile, "xds-tls-ca-file", "", "CA bundle that data planes' client certificates must chain to")
	fs.StringVar(&o.XDSTLSClientCertFile, "xds-tls-client-cert-file", "", "client certificate the embedded proxy presents to the xDS server (default: --xds-tls-cert-file, if it allows client auth)")
	fs.StringVar(&o.XDSTLSClientKeyFile, "xds-tls-client-key-file", "", "private key of --xds-tls-client-cert-file")
	fs.BoolVar(&o.ManagedTLS, "managed-certificates", false, "keep a certificate authority and certificates in Secrets of --certificates-namespace, issued and rotated by the controller: xDS over mutual TLS, Envoy's client certificate in Secret portico-xds-client, and the webhook's certificate and caBundle")
	fs.StringVar(&o.CertificatesNamespace, "certificates-namespace", "portico-system", "namespace of the Secrets of --managed-certificates")
	xdsNames := fs.String("xds-server-names", "", "comma-separated names data planes dial the xDS server by, for its managed certificate (default portico.<ns>.svc,portico.<ns>.svc.cluster.local)")
	hookNames := fs.String("webhook-server-names", "", "comma-separated names of the webhook's managed certificate (default portico-webhook.<ns>.svc)")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", "portico", "the ValidatingWebhookConfiguration whose caBundle --managed-certificates keeps current")
	fs.BoolVar(&o.XDSInsecure, "xds-insecure", false, "serve xDS in plaintext on a non-loopback --xds-addr (anything that reaches it can read every TLS Secret Portico serves); refused without this flag")
	fs.StringVar(&o.PprofAddr, "pprof-addr", "", "serve Go's profiles (/debug/pprof/) on this loopback address, such as 127.0.0.1:6060 (default: off)")
	fs.StringVar(&o.WebhookAddr, "webhook-addr", "", "serve the validating admission webhook (HTTPS, path /validate) on this address, such as :9443 (default: off)")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "directory holding the webhook's tls.crt and tls.key (a kubernetes.io/tls Secret volume), read again when they change; without it, --managed-certificates issues the webhook's certificate")
	headerLimitFlags(fs, &o.MaxRequestHeadersKB, &o.MaxRequestHeaders)
	trustedHopsFlag(fs, &o.NumTrustedHops)
	rateLimit := rateLimitFlags(fs)
	globalAuth := globalAuthFlag(fs)
	global := globalFlags(fs)
	headers := headersPolicyFlags(fs)
	dataPlane := gatewayDataPlaneFlags(fs, &o.GatewayDataPlanes)
	logs := logFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	var fileSettings []setting
	if *configFile != "" {
		var err error
		if fileSettings, err = applyConfigFile(fs, *configFile); err != nil {
			return fail(stderr, "serve: --config: %v", err)
		}
	}
	logger, err := logs.logger(stderr)
	if err != nil {
		return fail(stderr, "serve: %v", err)
	}
	o.Logger = logger
	if o.Global, err = global(); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	if o.DefaultHeaders, err = headers(); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	if err := dataPlane(); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	rl, err := rateLimit()
	if err != nil {
		return fail(stderr, "serve: %v", err)
	}
	o.RateLimit, o.DefaultGlobalRateLimit = rl.service, rl.defaultPolicy
	if o.GlobalAuthorization, err = globalAuth(); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	if err := o.XDSTLS.Validate(); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	o.XDSServerNames, o.WebhookServerNames = splitList(*xdsNames), splitList(*hookNames)
	o.WatchNamespaces = splitList(*watch)
	o.RootNamespaces = splitList(*roots)
	o.IngressClassNames = splitList(*classes)
	if o.FallbackCertificate, err = fallbackCertificate(*fallback); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	o.IngressStatusAddresses = splitList(*statusAddr)
	if *envoySvc != "" {
		ns, name, ok := strings.Cut(*envoySvc, "/")
		if !ok || ns == "" || name == "" {
			return fail(stderr, "serve: --envoy-service %q: use namespace/name", *envoySvc)
		}
		o.EnvoyService = types.NamespacedName{Namespace: ns, Name: name}
	}
	if o.Config, err = restConfig(*kubeconfig); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	o.Config.QPS, o.Config.Burst = float32(*qps), *burst
	s, err := app.NewServer(o)
	if err != nil {
		return fail(stderr, "serve: %v", err)
	}
	if *configFile != "" {
		go watchConfigFile(ctx, fs, *configFile, fileSettings, configPollInterval, logger)
	}
	logger.Info("portico serve", "xds", s.XDSAddr(), "admin", o.AdminAddr, "classes", o.IngressClassNames, "embedded_proxy", o.EmbeddedProxy)
	if err := s.Run(ctx); err != nil {
		return fail(stderr, "serve: %v", err)
	}
	return 0
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		// client-go's own message names neither the flag nor, for some errors, the file.
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, trimPath(err, kubeconfig))
	}
	return cfg, nil
}

// trimPath drops a leading "stat PATH: " or "open PATH: " from err's message, which
// would only repeat the path.
func trimPath(err error, path string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return pe.Err
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// fallbackCertificate parses --fallback-certificate: "" is none.
func fallbackCertificate(v string) (*types.NamespacedName, error) {
	return secretRef("--fallback-certificate", v)
}

// secretRef parses the NAMESPACE/NAME of a Secret given to flag: "" is none.
func secretRef(flag, v string) (*types.NamespacedName, error) {
	if v == "" {
		return nil, nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%s %q: use NAMESPACE/NAME of a kubernetes.io/tls Secret", flag, v)
	}
	return &types.NamespacedName{Namespace: ns, Name: name}, nil
}
