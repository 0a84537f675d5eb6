package cli

import (
	"context"
	"io"

	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/xds/translate"
	"github.com/portico-dev/portico/internal/xds/xdstls"
)

func proxyCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("proxy", stderr)
	withUsage(fs, "proxy --xds-server ADDR [flags]")
	xdsServer := fs.String("xds-server", "", "host:port of the xDS (ADS) server (required)")
	httpAddr := fs.String("http-addr", "", "bind the HTTP listener here instead of the address in its xDS Listener")
	httpsAddr := fs.String("https-addr", "", "bind the HTTPS listener here instead of the address in its xDS Listener")
	nodeID := fs.String("node-id", "portico-proxy", "node id sent to the xDS server")
	gateway := fs.String("gateway", "", "serve the listeners of this Gateway API Gateway, NAMESPACE/NAME, and no others (default: the shared listeners of Ingress, IngressRoute and HTTPProxy)")
	var tlsFiles xdstls.Files
	fs.StringVar(&tlsFiles.CertFile, "xds-tls-cert-file", "", "connect to the xDS server over mutual TLS with this client certificate (with --xds-tls-key-file and --xds-tls-ca-file)")
	fs.StringVar(&tlsFiles.KeyFile, "xds-tls-key-file", "", "private key of --xds-tls-cert-file")
	fs.StringVar(&tlsFiles.CAFile, "xds-tls-ca-file", "", "CA bundle that verifies the xDS server's certificate")
	serverName := fs.String("xds-tls-server-name", "", "name the xDS server's certificate must carry (default: the host of --xds-server)")
	logs := logFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *xdsServer == "" {
		return fail(stderr, "proxy: --xds-server ADDR is required")
	}
	logger, accessLogger, sink, err := newLoggers(logs, stderr)
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
	if err := tlsFiles.Validate(); err != nil {
		return fail(stderr, "proxy: %v", err)
	}
	if err := validGatewayName(*gateway); err != nil {
		return fail(stderr, "proxy: --gateway: %v", err)
	}
	cfg := proxy.Config{XDSAddress: *xdsServer, NodeID: *nodeID, Gateway: *gateway, ListenerAddrs: addrs, Logger: logger, AccessLogger: accessLogger, LogBatcher: sink}
	if tlsFiles.Enabled() {
		if cfg.XDSCredentials, err = xdstls.ClientCredentials(tlsFiles, *serverName); err != nil {
			return fail(stderr, "proxy: %v", err)
		}
	} else if *serverName != "" {
		return fail(stderr, "proxy: --xds-tls-server-name needs --xds-tls-cert-file, --xds-tls-key-file and --xds-tls-ca-file")
	}
	p := proxy.New(cfg)
	if err := p.Run(ctx); err != nil {
		return fail(stderr, "proxy: %v", err)
	}
	return 0
}
