package cli

import (
	"context"
	"io"

	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/xds/translate"
)

func proxyCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("proxy", stderr)
	xdsServer := fs.String("xds-server", "", "host:port of the xDS (ADS) server (required)")
	httpAddr := fs.String("http-addr", "", "bind the HTTP listener here instead of the address in its xDS Listener")
	httpsAddr := fs.String("https-addr", "", "bind the HTTPS listener here instead of the address in its xDS Listener")
	nodeID := fs.String("node-id", "portico-proxy", "node id sent to the xDS server")
	newLogger := logFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *xdsServer == "" {
		return fail(stderr, "proxy: --xds-server ADDR is required")
	}
	logger, err := newLogger(stderr)
	if err != nil {
		return fail(stderr, "proxy: %v", err)
	}
	addrs := map[string]string{}
	if *httpAddr != "" {
		addrs[translate.ListenerHTTP] = *httpAddr
	}
	if *httpsAddr != "" {
		addrs[translate.ListenerHTTPS] = *httpsAddr
	}
	p := proxy.New(proxy.Config{XDSAddress: *xdsServer, NodeID: *nodeID, ListenerAddrs: addrs, Logger: logger})
	if err := p.Run(ctx); err != nil {
		return fail(stderr, "proxy: %v", err)
	}
	return 0
}
