package cli

import (
	"context"
	"io"

	"github.com/portico-dev/portico/internal/authz"
)

func authzCmd(ctx context.Context, args []string, _, stderr io.Writer) int {
	fs := newFlagSet("authz", stderr)
	withUsage(fs, "authz --listen ADDR --htpasswd FILE [--http-listen ADDR] [--realm NAME] [--delay DURATION] [--tls-cert FILE --tls-key FILE] [flags]")
	var c authz.Config
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:9100", "address to serve ext_authz gRPC v3 on")
	fs.StringVar(&c.HTTPListen, "http-listen", "", "also answer plain HTTP checks (HTTPProxy serviceType: http) on this address: HTTP/1.1 or HTTP/2 (h2c), over TLS with --tls-cert")
	fs.StringVar(&c.HTPasswd, "htpasswd", "", "htpasswd `FILE` of the users allowed (hashed passwords; required)")
	fs.StringVar(&c.Realm, "realm", authz.DefaultRealm, "realm named in the WWW-Authenticate challenge of denied requests")
	fs.DurationVar(&c.Delay, "delay", 0, "wait this long before answering each check, as a slow server would")
	fs.StringVar(&c.TLSCertFile, "tls-cert", "", "PEM certificate (chain) `FILE`: serve gRPC (and --http-listen) over TLS instead of clear text (needs --tls-key)")
	fs.StringVar(&c.TLSKeyFile, "tls-key", "", "PEM private key `FILE` of --tls-cert")
	logs := logFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if c.HTPasswd == "" {
		return fail(stderr, "authz: --htpasswd FILE is required")
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return fail(stderr, "authz: --tls-cert and --tls-key go together")
	}
	if c.Delay < 0 {
		return fail(stderr, "authz: --delay must not be negative")
	}
	logger, err := logs.logger(stderr)
	if err != nil {
		return fail(stderr, "authz: %v", err)
	}
	c.Logger = logger
	s, err := authz.New(c)
	if err != nil {
		return fail(stderr, "authz: %v", err)
	}
	if err := s.Run(ctx); err != nil {
		return fail(stderr, "authz: %v", err)
	}
	return 0
}
