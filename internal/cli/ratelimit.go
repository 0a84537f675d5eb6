package cli

import (
	"flag"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// rateLimitFlags adds the global rate limit service's flags (run and serve); the
// function it returns is the service they configure, nil without
// --rate-limit-service, or what is wrong with them.
func rateLimitFlags(fs *flag.FlagSet) func() (*translate.RateLimitService, error) {
	var s translate.RateLimitService
	fs.StringVar(&s.Address, "rate-limit-service", "", "`host:port` of the global rate limit service (Envoy's gRPC protocol, such as envoyproxy/ratelimit), for rateLimitPolicy.global: an IP address, or a DNS name such as ratelimit.NS.svc.cluster.local:8081 (default: none, and global policies are not enforced)")
	fs.StringVar(&s.Domain, "rate-limit-domain", "contour", "domain sent to the rate limit service with every request (its configuration's domain)")
	fs.BoolVar(&s.FailOpen, "rate-limit-fail-open", false, "let requests through when the rate limit service does not answer (default: answer them 500)")
	fs.DurationVar(&s.Timeout, "rate-limit-timeout", translate.DefaultRateLimitTimeout, "how long a request waits for the rate limit service")
	fs.BoolVar(&s.XRateLimitHeaders, "rate-limit-x-headers", false, "add X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset to responses of globally limited routes")
	return func() (*translate.RateLimitService, error) {
		if s.Address == "" {
			return nil, nil
		}
		return &s, translate.CheckRateLimitService(&s)
	}
}
