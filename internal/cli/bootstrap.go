package cli

import (
	"context"
	"io"

	"github.com/portico-dev/portico/internal/xds/bootstrap"
)

func bootstrapCmd(_ context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("bootstrap", stderr)
	var o bootstrap.Options
	fs.StringVar(&o.XDSAddress, "xds-address", "portico:8001", "host:port of Portico's xDS server")
	fs.StringVar(&o.AdminAddress, "admin-address", "127.0.0.1:9001", "Envoy's admin listener")
	fs.StringVar(&o.NodeID, "node-id", "envoy", "Envoy node id")
	positional, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	if len(positional) > 1 {
		return fail(stderr, "bootstrap: one PATH expected, got %q", positional)
	}
	var path string
	if len(positional) == 1 {
		path = positional[0]
	}
	if path == "" {
		return fail(stderr, "bootstrap: usage: portico bootstrap PATH [--xds-address HOST:PORT]")
	}
	if err := bootstrap.Write(path, o); err != nil {
		return fail(stderr, "bootstrap: %v", err)
	}
	return 0
}
