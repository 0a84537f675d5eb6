package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/portico-dev/portico/internal/xds/xdstls"
)

func certgenCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("certgen", stderr)
	outDir := fs.String("out-dir", "", "directory to write ca.crt, ca.key, xds.crt, xds.key, client.crt and client.key into (required)")
	names := fs.String("server-name", "portico.portico-system.svc", "comma-separated DNS names or IPs of the xDS server (localhost and 127.0.0.1 are always added)")
	validity := fs.Duration("validity", 365*24*time.Hour, "how long the certificates are valid")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return fail(stderr, "certgen: unexpected arguments %q", fs.Args())
	}
	if *outDir == "" {
		return fail(stderr, "certgen: --out-dir DIR is required")
	}
	if err := xdstls.Generate(*outDir, splitList(*names), *validity); err != nil {
		return fail(stderr, "certgen: %v", err)
	}
	for _, n := range []string{xdstls.CACertFile, xdstls.CAKeyFile, xdstls.ServerCertFile, xdstls.ServerKeyFile, xdstls.ClientCertFile, xdstls.ClientKeyFile} {
		fmt.Fprintln(stdout, filepath.Join(*outDir, n))
	}
	return 0
}
