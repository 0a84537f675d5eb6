package translate

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitconfv3 "github.com/envoyproxy/go-control-plane/envoy/config/ratelimit/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
)

// rateLimitExtension is the rate limit service's ExtensionService resolved, nil
// without one.
func (o Options) rateLimitExtension() *dag.RateLimitExtension {
	if o.extensions == nil {
		return nil
	}
	return o.extensions.RateLimit
}

// RateLimitService is the global rate limit service (Options.RateLimit): Envoy's rate
// limit protocol (envoy.service.ratelimit.v3) over gRPC, at an address in clear text,
// or through an ExtensionService (which says the protocol, TLS and load balancing).
type RateLimitService struct {
	// Address is host:port: an IP address, or a DNS name (a Service's, in a cluster),
	// which the data plane resolves and which must not be a loopback address then.
	Address string
	// ExtensionService, set instead of Address, names the ExtensionService of the
	// service (dag.Options.RateLimitExtension): its cluster is the graph's
	// (dag.Graph.Extensions), and its timeoutPolicy.response replaces Timeout.
	ExtensionService *types.NamespacedName
	// Domain is sent with every request; the service's configuration is per domain.
	Domain string
	// FailOpen lets requests through when the service cannot answer; otherwise they get
	// 500.
	FailOpen bool
	// Timeout bounds a call to the service; 0 means DefaultRateLimitTimeout.
	Timeout time.Duration
	// XRateLimitHeaders adds the draft RFC's X-RateLimit-Limit, -Remaining and -Reset
	// headers to responses.
	XRateLimitHeaders bool
	// ResourceExhausted answers limited gRPC requests RESOURCE_EXHAUSTED instead of
	// the UNAVAILABLE of a 429 (Contour's enableResourceExhaustedCode).
	ResourceExhausted bool
}

// DefaultRateLimitTimeout bounds a call to the rate limit service when
// RateLimitService.Timeout is 0.
const DefaultRateLimitTimeout = 100 * time.Millisecond

// RateLimitClusterName is the rate limit service's cluster; without "/", no Service's
// cluster can have it.
const RateLimitClusterName = "ratelimit_service"

// CheckRateLimitService says what is wrong with s, so that a command line can refuse
// it before anything runs.
func CheckRateLimitService(s *RateLimitService) error {
	if s == nil {
		return nil
	}
	if s.ExtensionService != nil {
		if s.Address != "" {
			return fmt.Errorf("the rate limit service is given twice, by address (%s) and by ExtensionService (%s): keep one", s.Address, s.ExtensionService)
		}
		if s.ExtensionService.Namespace == "" || s.ExtensionService.Name == "" {
			return fmt.Errorf("the rate limit service's ExtensionService %q needs a namespace and a name (NAMESPACE/NAME)", s.ExtensionService)
		}
		return checkRateLimitSettings(s)
	}
	host, port, err := net.SplitHostPort(s.Address)
	if err != nil {
		return fmt.Errorf("rate limit service address %q: %w", s.Address, err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("rate limit service address %q: the port must be 1-65535", s.Address)
	}
	if host == "" {
		return fmt.Errorf("rate limit service address %q needs a host", s.Address)
	}
	return checkRateLimitSettings(s)
}

// checkRateLimitSettings says what is wrong with s but its address.
func checkRateLimitSettings(s *RateLimitService) error {
	if s.Domain == "" {
		return fmt.Errorf("the rate limit service needs a domain")
	}
	if s.Timeout < 0 {
		return fmt.Errorf("rate limit service timeout %s must not be negative", s.Timeout)
	}
	return nil
}

// rateLimitCluster is the service's cluster, HTTP/2 in clear text: an IP's endpoint in
// a load assignment of its own, or a DNS name the data plane resolves (as an
// ExternalName Service's). nil without a service.
func rateLimitCluster(s *RateLimitService) *dag.Cluster {
	if s == nil || s.ExtensionService != nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(s.Address)
	p, _ := strconv.ParseUint(port, 10, 16)
	c := &dag.Cluster{Name: RateLimitClusterName, Port: int32(p), Protocol: "h2c"}
	if _, err := netip.ParseAddr(host); err == nil {
		c.Endpoints = []dag.Endpoint{{Address: host, Port: int32(p)}}
	} else {
		c.ExternalName = host
	}
	return c
}

// rateLimitFilter is Envoy's global rate limit filter, in the connection managers when
// a service is configured; the descriptors are the routes' and virtual hosts'
// rate_limits (globalRateLimits), and a route whose policy is disabled ignores its
// virtual host's.
var rateLimitFilter = httpFilter{
	name: "envoy.filters.http.ratelimit",
	listener: func(_ *dag.SecureVirtualHost, opts Options) *anypb.Any {
		s := opts.RateLimit
		if s == nil {
			return nil
		}
		cluster, timeout := RateLimitClusterName, s.Timeout
		if es := s.ExtensionService; es != nil {
			cluster = dag.ExtensionClusterName(es.Namespace, es.Name)
			if rl := opts.rateLimitExtension(); rl != nil && rl.Timeout != nil {
				timeout = *rl.Timeout
			}
		}
		if timeout == 0 {
			timeout = DefaultRateLimitTimeout
		}
		cfg := &ratelimitv3.RateLimit{
			Domain:          s.Domain,
			Timeout:         durationpb.New(timeout),
			FailureModeDeny: !s.FailOpen,
			RateLimitService: &ratelimitconfv3.RateLimitServiceConfig{
				GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: cluster},
				}},
				TransportApiVersion: corev3.ApiVersion_V3,
			},
		}
		cfg.RateLimitedAsResourceExhausted = s.ResourceExhausted
		if s.XRateLimitHeaders {
			cfg.EnableXRatelimitHeaders = ratelimitv3.RateLimit_DRAFT_VERSION_03
		}
		return mustAny(cfg)
	},
	route: func(r *dag.Route, _ *dag.VirtualHost, opts Options) *anypb.Any {
		if opts.RateLimit == nil || r.RateLimit == nil || r.RateLimit.Global == nil || !r.RateLimit.Global.Disabled {
			return nil
		}
		return mustAny(&ratelimitv3.RateLimitPerRoute{VhRateLimits: ratelimitv3.RateLimitPerRoute_IGNORE})
	},
}

// globalRateLimits are the rate_limits of a virtual host's or route's policy; nil
// without descriptors.
func globalRateLimits(p *dag.RateLimitPolicy) []*routev3.RateLimit {
	if p == nil || p.Global == nil {
		return nil
	}
	out := make([]*routev3.RateLimit, 0, len(p.Global.Descriptors))
	for _, d := range p.Global.Descriptors {
		rl := &routev3.RateLimit{}
		for _, e := range d.Entries {
			rl.Actions = append(rl.Actions, rateLimitAction(e))
		}
		out = append(out, rl)
	}
	return out
}

func rateLimitAction(e dag.RateLimitEntry) *routev3.RateLimit_Action {
	switch {
	case e.GenericKey != nil:
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_GenericKey_{
			GenericKey: &routev3.RateLimit_Action_GenericKey{DescriptorKey: e.GenericKey.Key, DescriptorValue: e.GenericKey.Value},
		}}
	case e.RequestHeader != nil:
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RequestHeaders_{
			RequestHeaders: &routev3.RateLimit_Action_RequestHeaders{HeaderName: e.RequestHeader.Header, DescriptorKey: e.RequestHeader.Key},
		}}
	case e.HeaderValueMatch != nil:
		m := &routev3.RateLimit_Action_HeaderValueMatch{DescriptorValue: e.HeaderValueMatch.Value, ExpectMatch: wrapperspb.Bool(e.HeaderValueMatch.ExpectMatch)}
		for _, h := range e.HeaderValueMatch.Headers {
			m.Headers = append(m.Headers, headerMatcher(h))
		}
		return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_HeaderValueMatch_{HeaderValueMatch: m}}
	}
	return &routev3.RateLimit_Action{ActionSpecifier: &routev3.RateLimit_Action_RemoteAddress_{RemoteAddress: &routev3.RateLimit_Action_RemoteAddress{}}}
}

// Extension is the ExtensionService of the service, nil when it is reached by address
// (or s is nil).
func (s *RateLimitService) Extension() *types.NamespacedName {
	if s == nil {
		return nil
	}
	return s.ExtensionService
}
