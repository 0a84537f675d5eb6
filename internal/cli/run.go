package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/runstate"
	"github.com/portico-dev/portico/internal/xds/translate"
)

func runCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("run", stderr)
	withUsage(fs, "run --manifests DIR [flags]\n   or: portico run DIR [flags]")
	var o app.RunOptions
	configFile := fs.String("config", "", "YAML file of settings, keyed by flag name or laid out as Contour's configuration file (flags on the command line win; docs/contour-config.md)")
	fs.StringVar(&o.ManifestDir, "manifests", "", "directory of Kubernetes manifests to serve (or give DIR as the argument)")
	fs.StringVar(&o.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the HTTP listener")
	fs.StringVar(&o.GatewayHost, "gateway-host", "", "address on which the listeners of Gateway API Gateways are served (default: the host of --http-addr)")
	fs.IntVar(&o.GatewayPortOffset, "gateway-port-offset", app.DefaultGatewayPortOffset, "a Gateway listener on port P is served on port P+OFFSET (80 on 10080 by default); 0 serves the listener's own port")
	fs.StringVar(&o.HTTPSAddr, "https-addr", "127.0.0.1:8443", "address of the HTTPS listener")
	fs.StringVar(&o.AdminAddr, "admin-addr", "127.0.0.1:8090", "address of the admin endpoint (/healthz, /readyz, /metrics, /statuses)")
	fs.StringVar(&o.PprofAddr, "pprof-addr", "", "serve Go's profiles (/debug/pprof/) on this loopback address, such as 127.0.0.1:6060 (default: off)")
	fs.StringVar(&o.XDSAddr, "xds-addr", "127.0.0.1:0", "address of the in-process xDS server (port 0: any free port)")
	classes := fs.String("ingress-class-name", dag.DefaultIngressClassName, "the ingress classes Portico serves, comma-separated (as Contour's: contour,team1)")
	fs.BoolVar(&o.AllowExternalName, "enable-external-name-services", true, "route to Services of type ExternalName (never to loopback or other namespaces)")
	roots := fs.String("root-namespaces", "", "comma-separated namespaces where root IngressRoutes and HTTPProxies (those with a virtualhost) may live (default: any)")
	fallback := fs.String("fallback-certificate", "", "NAMESPACE/NAME of a kubernetes.io/tls Secret presented to HTTPS clients that send no server name (or an unknown one), for the HTTPProxies with tls.enableFallbackCertificate")
	fs.BoolVar(&o.DisableIngress, "disable-ingress", false, "ignore Ingress objects (serve IngressRoutes and HTTPProxies only)")
	fs.BoolVar(&o.DisablePermitInsecure, "disable-permit-insecure", false, "ignore HTTPProxy routes' permitInsecure: plain HTTP requests to TLS hosts are all redirected to HTTPS")
	stateFile := fs.String("state-file", "", "`file` where run keeps objects' ages and last good versions across restarts (default $XDG_STATE_HOME/portico/run/DIRNAME-HASH.json; \"none\" keeps none)")
	headerLimitFlags(fs, &o.MaxRequestHeadersKB, &o.MaxRequestHeaders)
	trustedHopsFlag(fs, &o.NumTrustedHops)
	rateLimit := rateLimitFlags(fs)
	globalAuth := globalAuthFlag(fs)
	global := globalFlags(fs)
	headers := headersPolicyFlags(fs)
	logs := logFlags(fs)
	positional, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	var fileSettings []setting
	if *configFile != "" {
		var err error
		if fileSettings, err = applyConfigFile(fs, *configFile); err != nil {
			return fail(stderr, "run: --config: %v", err)
		}
	}
	var err error
	if o.Global, err = global(); err != nil {
		return fail(stderr, "run: %v", err)
	}
	if o.DefaultHeaders, err = headers(); err != nil {
		return fail(stderr, "run: %v", err)
	}
	rl, err := rateLimit()
	if err != nil {
		return fail(stderr, "run: %v", err)
	}
	o.RateLimit, o.DefaultGlobalRateLimit = rl.service, rl.defaultPolicy
	if o.GlobalAuthorization, err = globalAuth(); err != nil {
		return fail(stderr, "run: %v", err)
	}
	dir, err := manifestDir(o.ManifestDir, positional)
	if err != nil {
		return fail(stderr, "run: %v", err)
	}
	o.ManifestDir = dir
	if st, err := os.Stat(o.ManifestDir); err != nil {
		return fail(stderr, "run: manifests directory: %v", err)
	} else if !st.IsDir() {
		return fail(stderr, "run: manifests directory %q is a file; give the directory that holds it", o.ManifestDir)
	}
	logger, accessLogger, sink, err := newLoggers(logs, stderr)
	if err != nil {
		return fail(stderr, "run: %v", err)
	}
	o.Logger, o.AccessLogger, o.LogBatcher = logger, accessLogger, sink
	o.RootNamespaces = splitList(*roots)
	o.IngressClassNames = splitList(*classes)
	if o.FallbackCertificate, err = fallbackCertificate(*fallback); err != nil {
		return fail(stderr, "run: %v", err)
	}
	if o.StateFile, err = stateFilePath(fs, *stateFile, o.ManifestDir, logger); err != nil {
		return fail(stderr, "run: %v", err)
	}
	r, err := app.NewRunner(o)
	if err != nil {
		return fail(stderr, "run: %v", err)
	}
	if *configFile != "" {
		go watchConfigFile(ctx, fs, *configFile, fileSettings, configPollInterval, logger)
	}
	logger.Info("portico run", "manifests", o.ManifestDir, "http", o.HTTPAddr, "https", o.HTTPSAddr, "admin", o.AdminAddr, "state_file", o.StateFile)
	if err := r.Run(ctx); err != nil {
		return fail(stderr, "run: %v", err)
	}
	return 0
}

// manifestDir returns the directory `run` serves: --manifests DIR, or DIR given alone
// as `portico check` takes it. Both are fine when they name the same directory.
func manifestDir(flagDir string, positional []string) (string, error) {
	switch {
	case len(positional) == 0 && flagDir == "":
		return "", errors.New("give the directory of manifests to serve: portico run DIR (or --manifests DIR)")
	case len(positional) == 0:
		return flagDir, nil
	case len(positional) > 1:
		return "", fmt.Errorf("one directory expected, got %q", positional)
	case flagDir != "" && filepath.Clean(flagDir) != filepath.Clean(positional[0]):
		return "", fmt.Errorf("--manifests %q and the argument %q name different directories; give one", flagDir, positional[0])
	}
	return positional[0], nil
}

// stateFilePath returns the state file --state-file names: value if given, none for
// "none" or "" given, and by default runstate.DefaultPath of the manifest directory (none,
// with a warning, if there is no directory for it). A file inside the manifest directory
// is refused: the watch would read it as a manifest after every write.
func stateFilePath(fs *flag.FlagSet, value, dir string, log *slog.Logger) (string, error) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "state-file" })
	if set {
		if value == "none" || value == "" {
			return "", nil
		}
		if inside(dir, value) {
			return "", fmt.Errorf("--state-file %q is inside the manifests directory %q, where it would be read as a manifest; put it elsewhere", value, dir)
		}
		return value, nil
	}
	path, err := runstate.DefaultPath(dir)
	if err != nil {
		log.Warn("no state kept across restarts: a restart starts as a first start would; pass --state-file PATH", "err", err)
		return "", nil
	}
	return path, nil
}

// inside reports whether path is dir or below it.
func inside(dir, path string) bool {
	d, err1 := filepath.Abs(dir)
	p, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && filepath.IsLocal(rel)
}

// headerLimitFlags adds --max-request-headers-kb and --max-request-headers (run and
// serve), bound to kb and count and defaulting to Envoy's limits.
func headerLimitFlags(fs *flag.FlagSet, kb, count *uint32) {
	*kb, *count = translate.DefaultMaxRequestHeadersKB, translate.DefaultMaxRequestHeaders
	fs.Var(rangeFlag{kb, 1, translate.MaxRequestHeadersKBLimit}, "max-request-headers-kb",
		"largest total size of a request's headers, in `KiB` (1-8192); larger requests get 431")
	fs.Var(rangeFlag{count, 1, math.MaxUint32}, "max-request-headers",
		"most headers a request may have (`N`); more get 431")
}

// trustedHopsFlag adds --num-trusted-hops (run and serve).
func trustedHopsFlag(fs *flag.FlagSet, hops *uint32) {
	fs.Var(rangeFlag{hops, 0, math.MaxUint32}, "num-trusted-hops",
		"how many proxies in front of Portico append to X-Forwarded-For (`N`): the client's address (ipAllowPolicy/ipDenyPolicy source Remote) is the N-th address from its right end; 0 trusts none and takes the connection's")
}

// rangeFlag is a uint32 flag between lo and hi.
type rangeFlag struct {
	p      *uint32
	lo, hi uint64
}

func (f rangeFlag) String() string {
	if f.p == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*f.p), 10)
}

func (f rangeFlag) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n < f.lo || n > f.hi {
		return fmt.Errorf("want a whole number from %d to %d", f.lo, f.hi)
	}
	*f.p = uint32(n)
	return nil
}
