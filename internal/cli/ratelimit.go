package cli

import (
	"flag"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// rateLimitConfig is what the global rate limit flags configure.
type rateLimitConfig struct {
	service       *translate.RateLimitService // nil without --rate-limit-service
	defaultPolicy *dag.GlobalRateLimit        // nil without --rate-limit-default-global-policy
}

// rateLimitFlags adds the global rate limit service's flags (run and serve); the
// function it returns is what they configure, or what is wrong with them.
func rateLimitFlags(fs *flag.FlagSet) func() (rateLimitConfig, error) {
	var s translate.RateLimitService
	fs.StringVar(&s.Address, "rate-limit-service", "", "`host:port` of the global rate limit service (Envoy's gRPC protocol, such as envoyproxy/ratelimit), for rateLimitPolicy.global: an IP address, or a DNS name such as ratelimit.NS.svc.cluster.local:8081 (default: none, and global policies are not enforced)")
	fs.StringVar(&s.Domain, "rate-limit-domain", "contour", "domain sent to the rate limit service with every request (its configuration's domain)")
	fs.BoolVar(&s.FailOpen, "rate-limit-fail-open", false, "let requests through when the rate limit service does not answer (default: answer them 500)")
	fs.DurationVar(&s.Timeout, "rate-limit-timeout", translate.DefaultRateLimitTimeout, "how long a request waits for the rate limit service")
	fs.BoolVar(&s.XRateLimitHeaders, "rate-limit-x-headers", false, "add X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset to responses of globally limited routes")
	fs.BoolVar(&s.ResourceExhausted, "rate-limit-resource-exhausted", false, "answer gRPC requests over a global limit with grpc-status RESOURCE_EXHAUSTED (8) instead of UNAVAILABLE (14), the status of a 429 (Contour's enableResourceExhaustedCode)")
	ext := fs.String("rate-limit-extension-service", "", "`NAMESPACE/NAME` of the ExtensionService of the global rate limit service, instead of --rate-limit-service (as Contour's rateLimitService.extensionService): its protocol (h2c or h2 with its TLS validation), load balancing and timeoutPolicy.response, which replaces --rate-limit-timeout")
	def := fs.String("rate-limit-default-global-policy", "", "global rate limit policy (`YAML or JSON`, as an HTTPProxy's rateLimitPolicy.global) of every HTTPProxy virtual host without one, such as '{descriptors: [{entries: [{remoteAddress: {}}]}]}'")
	return func() (rateLimitConfig, error) {
		var out rateLimitConfig
		if *def != "" {
			var p contourv1.GlobalRateLimitPolicy
			if err := yaml.UnmarshalStrict([]byte(*def), &p); err != nil {
				return out, fmt.Errorf("--rate-limit-default-global-policy: %w", err)
			}
			g, err := dag.ParseDefaultGlobalRateLimit(&p)
			if err != nil {
				return out, fmt.Errorf("--rate-limit-default-global-policy: %w", err)
			}
			out.defaultPolicy = g
		}
		if *ext != "" {
			ns, name, ok := strings.Cut(*ext, "/")
			if !ok || ns == "" || name == "" {
				return out, fmt.Errorf("--rate-limit-extension-service %q: give NAMESPACE/NAME", *ext)
			}
			s.ExtensionService = &types.NamespacedName{Namespace: ns, Name: name}
		}
		if s.Address == "" && s.ExtensionService == nil {
			if out.defaultPolicy != nil {
				return out, fmt.Errorf("--rate-limit-default-global-policy needs --rate-limit-service or --rate-limit-extension-service: without a service no global policy is enforced")
			}
			return out, nil
		}
		out.service = &s
		return out, translate.CheckRateLimitService(&s)
	}
}
