package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/portico-dev/portico/internal/xds/xdstls"
)

func certgenCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("certgen", stderr)
	withUsage(fs, "certgen --out-dir DIR [flags]")
	outDir := fs.String("out-dir", "", "directory to write ca.crt, ca.key, xds.crt, xds.key, client.crt and client.key into (required)")
	names := fs.String("server-name", "portico.portico-system.svc", "comma-separated DNS names or IPs of the xDS server (localhost and 127.0.0.1 are always added)")
	validity := fs.Duration("validity", 365*24*time.Hour, "how long the certificates are valid")
	webhook := fs.Bool("webhook", false, "instead, write the admission webhook's serving certificate: ca.crt (the caBundle), tls.crt and tls.key, valid for exactly the --server-name names (default "+defaultWebhookServerName+")")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *outDir == "" {
		return fail(stderr, "certgen: --out-dir DIR is required")
	}
	if *webhook {
		serverNames := []string{defaultWebhookServerName}
		if flagSet(fs, "server-name") {
			serverNames = splitList(*names)
		}
		if err := xdstls.GenerateWebhook(*outDir, serverNames, *validity); err != nil {
			return fail(stderr, "certgen: %v", err)
		}
		for _, n := range []string{xdstls.WebhookCACertFile, xdstls.WebhookCertFile, xdstls.WebhookKeyFile} {
			fmt.Fprintln(stdout, filepath.Join(*outDir, n))
		}
		return 0
	}
	if err := xdstls.Generate(*outDir, splitList(*names), *validity); err != nil {
		return fail(stderr, "certgen: %v", err)
	}
	for _, n := range []string{xdstls.CACertFile, xdstls.CAKeyFile, xdstls.ServerCertFile, xdstls.ServerKeyFile, xdstls.ClientCertFile, xdstls.ClientKeyFile} {
		fmt.Fprintln(stdout, filepath.Join(*outDir, n))
	}
	return 0
}

// defaultWebhookServerName is the name the API server calls the webhook Service of
// deploy/webhook.yaml by.
const defaultWebhookServerName = "portico-webhook.portico-system.svc"

// flagSet reports whether the flag called name was set on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
