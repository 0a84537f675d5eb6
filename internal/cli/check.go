package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/contourdiff"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/status"
)

// checkCmd prints every object's status. Exit code 1 when any object is invalid or
// orphaned, or a manifest could not be read; problems go to stderr so that stdout stays
// one JSON document with -o json.
func checkCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stderr)
	withUsage(fs, "check DIR [-o json] [flags]\n\nPrints the status every Ingress, IngressRoute, HTTPProxy and Gateway API object in DIR would get (Gateway API objects with their conditions after the table); exit code 1 if any is invalid or orphaned, or a file cannot be used.")
	output := fs.String("o", "table", "output format: table or json")
	classes := fs.String("ingress-class-name", dag.DefaultIngressClassName, "the ingress classes Portico serves, comma-separated (as Contour's: contour,team1)")
	externalName := fs.Bool("enable-external-name-services", true, "route to Services of type ExternalName, as portico run does")
	roots := fs.String("root-namespaces", "", "comma-separated namespaces where root IngressRoutes and HTTPProxies may live (default: any)")
	fallback := fs.String("fallback-certificate", "", "NAMESPACE/NAME of a kubernetes.io/tls Secret presented to HTTPS clients that send no server name (or an unknown one), for the HTTPProxies with tls.enableFallbackCertificate")
	clientCert := fs.String("envoy-client-certificate", "", "NAMESPACE/NAME of the kubernetes.io/tls Secret presented to backends over TLS, as run and serve take it: HTTPProxies with tls or h2 services are invalid when it cannot be used")
	disableIngress := fs.Bool("disable-ingress", false, "ignore Ingress objects")
	noInsecure := fs.Bool("disable-permit-insecure", false, "ignore HTTPProxy routes' permitInsecure, as the controller does with this flag")
	rateLimitService := fs.String("rate-limit-service", "", "`host:port` of the rate limit service the controller runs with; without it, global rate limit policies get a warning that they are not enforced")
	contour := fs.Bool("contour", false, "also list every field of DIR's manifests that behaves differently in Portico than in Contour (file, object, field, what each does, what to do), after the statuses (on stderr with -o json); the list does not change the exit code")
	globalAuth := globalAuthFlag(fs)
	allowOrphaned := fs.Bool("allow-orphaned", false, "exit 0 even if objects are orphaned (blue-green setups whose standby is orphaned by design); invalid objects still fail")
	positional, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	if len(positional) > 1 {
		return fail(stderr, "check: one directory expected, got %q", positional)
	}
	var dir string
	if len(positional) == 1 {
		dir = positional[0]
	}
	if dir == "" {
		fs.Usage()
		return 2
	}
	if *output != "table" && *output != "json" {
		return fail(stderr, "check: -o %q: use table or json", *output)
	}
	fallbackKey, err := fallbackCertificate(*fallback)
	if err != nil {
		return fail(stderr, "check: %v", err)
	}
	clientCertKey, err := secretRef("--envoy-client-certificate", *clientCert)
	if err != nil {
		return fail(stderr, "check: %v", err)
	}
	auth, err := globalAuth()
	if err != nil {
		return fail(stderr, "check: %v", err)
	}
	res, err := app.Check(dir, dag.Options{IngressClassNames: splitList(*classes), AllowExternalName: *externalName, RootNamespaces: splitList(*roots), DisableIngress: *disableIngress, DisablePermitInsecure: *noInsecure,
		FallbackCertificate: fallbackKey, ClientCertificate: clientCertKey, RateLimitService: *rateLimitService != "", GlobalAuthorization: auth})
	if err != nil {
		return fail(stderr, "check: %v", err)
	}
	for _, p := range res.Problems {
		fmt.Fprintf(stderr, "%s\n", p)
	}
	if res.TranslateErr != nil {
		fmt.Fprintf(stderr, "portico: check: internal error, please report it: %v\n", res.TranslateErr)
	}
	if *output == "json" {
		err = status.WriteJSON(stdout, res.Statuses)
	} else {
		err = status.WriteTable(stdout, res.Statuses)
	}
	if err != nil {
		return fail(stderr, "check: %v", err)
	}
	if *contour {
		w := stdout
		if *output == "json" {
			w = stderr
		}
		if err := writeContourDifferences(w, dir); err != nil {
			return fail(stderr, "check: --contour: %v", err)
		}
	}
	if status.Failed(res.Statuses, *allowOrphaned) || len(res.Problems) > 0 || res.TranslateErr != nil {
		return 1
	}
	return 0
}

// writeContourDifferences lists the fields of dir's manifests that behave differently
// than in Contour, one line each (contourdiff); the documents it cannot read are
// already reported with the statuses.
func writeContourDifferences(w io.Writer, dir string) error {
	findings, _, err := contourdiff.CheckDir(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nDifferences from Contour (%d; docs/contour.md explains each):\n", len(findings))
	for _, f := range findings {
		fmt.Fprintln(w, f)
	}
	return nil
}
