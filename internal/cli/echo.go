package cli

import (
	"context"
	"io"

	"github.com/portico-dev/portico/internal/echo"
)

func echoCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("echo", stderr)
	withUsage(fs, "echo --listen ADDR --service NAME [--namespace NS] [--tls-cert FILE --tls-key FILE] [flags]")
	var c echo.Config
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:9000", "address to listen on")
	fs.StringVar(&c.Service, "service", "", "service name reported in responses (required)")
	fs.StringVar(&c.Namespace, "namespace", "default", "namespace reported in responses")
	fs.StringVar(&c.TLSCertFile, "tls-cert", "", "PEM certificate (chain) `FILE`: serve HTTPS with h2 and HTTP/1.1 by ALPN instead of HTTP/1.1 and h2c (needs --tls-key)")
	fs.StringVar(&c.TLSKeyFile, "tls-key", "", "PEM private key `FILE` of --tls-cert")
	logs := logFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if c.Service == "" {
		return fail(stderr, "echo: --service NAME is required")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fail(stderr, "echo: --tls-cert and --tls-key go together")
	}
	logger, err := logs.logger(stderr)
	if err != nil {
		return fail(stderr, "echo: %v", err)
	}
	c.Logger = logger
	if err := echo.New(c).Run(ctx); err != nil {
		return fail(stderr, "echo: %v", err)
	}
	return 0
}
