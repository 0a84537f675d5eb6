package cli

import (
	"context"
	"io"
	"os"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/dag"
)

func runCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("run", stderr)
	var o app.RunOptions
	fs.StringVar(&o.ManifestDir, "manifests", "", "directory of Kubernetes manifests to serve (required)")
	fs.StringVar(&o.HTTPAddr, "http-addr", "127.0.0.1:8080", "address of the HTTP listener")
	fs.StringVar(&o.HTTPSAddr, "https-addr", "127.0.0.1:8443", "address of the HTTPS listener")
	fs.StringVar(&o.AdminAddr, "admin-addr", "127.0.0.1:8090", "address of the admin endpoint (/healthz, /readyz, /metrics)")
	fs.StringVar(&o.XDSAddr, "xds-addr", "127.0.0.1:0", "address of the in-process xDS server (port 0: any free port)")
	fs.StringVar(&o.IngressClassName, "ingress-class-name", dag.DefaultIngressClassName, "the ingress class Portico serves")
	fs.BoolVar(&o.AllowExternalName, "enable-external-name-services", true, "route to Services of type ExternalName (never to loopback or other namespaces)")
	roots := fs.String("root-namespaces", "", "comma-separated namespaces where root IngressRoutes (those with a virtualhost) may live (default: any)")
	fs.BoolVar(&o.DisableIngress, "disable-ingress", false, "ignore Ingress objects (serve IngressRoutes only)")
	newLogger := logFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if o.ManifestDir == "" {
		return fail(stderr, "run: --manifests DIR is required")
	}
	if st, err := os.Stat(o.ManifestDir); err != nil || !st.IsDir() {
		return fail(stderr, "run: --manifests %q is not a readable directory", o.ManifestDir)
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return fail(stderr, "run: %v", err)
	}
	o.Logger = logger
	o.RootNamespaces = splitList(*roots)
	r, err := app.NewRunner(o)
	if err != nil {
		return fail(stderr, "run: %v", err)
	}
	logger.Info("portico run", "manifests", o.ManifestDir, "http", o.HTTPAddr, "https", o.HTTPSAddr, "admin", o.AdminAddr)
	if err := r.Run(ctx); err != nil {
		return fail(stderr, "run: %v", err)
	}
	return 0
}
