package cli

import (
	"context"
	"io"

	"github.com/portico-dev/portico/internal/xds/bootstrap"
	"github.com/portico-dev/portico/internal/xds/xdstls"
)

func bootstrapCmd(_ context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("bootstrap", stderr)
	withUsage(fs, "bootstrap PATH [flags]\n\nWrites an Envoy bootstrap file to PATH that points Envoy at the xDS server of portico serve.")
	var o bootstrap.Options
	fs.StringVar(&o.XDSAddress, "xds-address", "portico:8001", "host:port of Portico's xDS server")
	fs.StringVar(&o.AdminAddress, "admin-address", bootstrap.DefaultAdminAddress, "Envoy's admin interface: unix:/PATH, or a loopback HOST:PORT")
	fs.StringVar(&o.StatsAddress, "stats-address", bootstrap.DefaultStatsAddress, "where Envoy serves /stats/prometheus and /ready to scrapers and probes")
	fs.StringVar(&o.NodeID, "node-id", "envoy", "Envoy node id")
	fs.StringVar(&o.Gateway, "gateway", "", "make this Envoy the data plane of the Gateway API Gateway NAMESPACE/NAME: it is sent that Gateway's listeners and no others (default: the shared listeners of Ingress, IngressRoute and HTTPProxy)")
	var tlsFiles bootstrap.TLSFiles
	fs.StringVar(&tlsFiles.CertFile, "xds-tls-cert-file", "", "path, inside the Envoy container, of the client certificate for mutual TLS to the xDS server (with --xds-tls-key-file and --xds-tls-ca-file)")
	fs.StringVar(&tlsFiles.KeyFile, "xds-tls-key-file", "", "path of the private key of --xds-tls-cert-file")
	fs.StringVar(&tlsFiles.CAFile, "xds-tls-ca-file", "", "path of the CA bundle that verifies the xDS server's certificate")
	fs.StringVar(&tlsFiles.ServerName, "xds-tls-server-name", "", "SNI and name the xDS server's certificate must carry (default: the host of --xds-address)")
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
	if err := validGatewayName(o.Gateway); err != nil {
		return fail(stderr, "bootstrap: --gateway: %v", err)
	}
	files := xdstls.Files{CertFile: tlsFiles.CertFile, KeyFile: tlsFiles.KeyFile, CAFile: tlsFiles.CAFile}
	if err := files.Validate(); err != nil {
		return fail(stderr, "bootstrap: %v", err)
	}
	if files.Enabled() {
		o.TLS = &tlsFiles
	} else if tlsFiles.ServerName != "" {
		return fail(stderr, "bootstrap: --xds-tls-server-name needs --xds-tls-cert-file, --xds-tls-key-file and --xds-tls-ca-file")
	}
	if err := bootstrap.Write(path, o); err != nil {
		return fail(stderr, "bootstrap: %v", err)
	}
	return 0
}
