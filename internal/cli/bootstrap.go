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
	// Accept the path before or after the flags.
	var path string
	rest := args
	for {
		if code, ok := parse(fs, rest); !ok {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		if path != "" {
			return fail(stderr, "bootstrap: one PATH expected")
		}
		path, rest = fs.Arg(0), fs.Args()[1:]
	}
	if path == "" {
		return fail(stderr, "bootstrap: usage: portico bootstrap PATH [--xds-address HOST:PORT]")
	}
	if err := bootstrap.Write(path, o); err != nil {
		return fail(stderr, "bootstrap: %v", err)
	}
	return 0
}
