// Package translate turns a routing graph into Envoy xDS v3 resources, in the shapes that
// docs/dev/xds-contract.md describes. Every resource it returns has passed ValidateAll:
// an invalid resource is a translator bug, reported as an error rather than published.
package translate

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/portico-dev/portico/internal/dag"
)

// Listener and route configuration names; the embedded proxy and Envoy see the same.
const (
	ListenerHTTP  = "ingress_http"
	ListenerHTTPS = "ingress_https"
	RouteHTTP     = "ingress_http"
)

// RouteHTTPS names the route configuration of one secure virtual host.
func RouteHTTPS(host string) string { return "https/" + host }

// Options say where the listeners bind and how clusters connect.
type Options struct {
	HTTPAddress    string // host:port, default 0.0.0.0:8080
	HTTPSAddress   string // host:port, default 0.0.0.0:8443
	ConnectTimeout time.Duration
	// HTTPSRedirectPort is the port of redirects from plain HTTP to HTTPS; 0 leaves it
	// out of the URL (443), right when a load balancer maps 443 to the HTTPS listener.
	HTTPSRedirectPort uint32
	// MaxRequestHeadersKB bounds the total size of a request's headers (HCM
	// max_request_headers_kb); larger requests get 431. 0 means 60, Envoy's default.
	MaxRequestHeadersKB uint32
	// MaxRequestHeaders bounds the number of a request's headers (HCM
	// common_http_protocol_options.max_headers_count); more get 431. 0 means 100,
	// Envoy's default.
	MaxRequestHeaders uint32
}

// Defaults of the request header limits, Envoy's own.
const (
	DefaultMaxRequestHeadersKB = 60
	DefaultMaxRequestHeaders   = 100
	// MaxRequestHeadersKBLimit is the largest max_request_headers_kb Envoy accepts.
	MaxRequestHeadersKBLimit = 8192
)

// CheckMaxRequestHeadersKB says what is wrong with a request header size limit (0 means
// the default), so that a command line can refuse it before anything runs. Any header
// count is valid (0 means the default).
func CheckMaxRequestHeadersKB(kb uint32) error {
	if kb > MaxRequestHeadersKBLimit {
		return fmt.Errorf("the request header size limit is %d KiB at most, got %d", MaxRequestHeadersKBLimit, kb)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.HTTPAddress == "" {
		o.HTTPAddress = "0.0.0.0:8080"
	}
	if o.HTTPSAddress == "" {
		o.HTTPSAddress = "0.0.0.0:8443"
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 2 * time.Second
	}
	if o.MaxRequestHeadersKB == 0 {
		o.MaxRequestHeadersKB = DefaultMaxRequestHeadersKB
	}
	if o.MaxRequestHeaders == 0 {
		o.MaxRequestHeaders = DefaultMaxRequestHeaders
	}
	return o
}

// Resources are the xDS resources of one graph, by type, each in a deterministic order.
type Resources struct {
	Listeners []types.Resource
	Routes    []types.Resource
	Clusters  []types.Resource
	Endpoints []types.Resource
	Secrets   []types.Resource
}

// validatable is what every generated xDS message implements.
type validatable interface{ ValidateAll() error }

// Translate converts g. It fails only if a generated resource does not validate, or on
// a translator bug, which is reported as an error rather than crashing the process: the
// caller keeps the last good configuration serving. Validation covers the messages packed
// in typed configs too (the HCM, TLS contexts, tcp_proxy, HTTP protocol options), which a
// resource's ValidateAll does not look into: mustAny validates them as it packs them.
func Translate(g *dag.Graph, opts Options) (res *Resources, err error) {
	defer func() {
		if r := recover(); r != nil {
			if inv, ok := r.(invalidPacked); ok {
				res, err = nil, fmt.Errorf("translator produced an invalid %T: %w", inv.msg, inv.err)
				return
			}
			res, err = nil, fmt.Errorf("translator bug (please report it): %v", r)
		}
	}()
	opts = opts.withDefaults()
	if err := CheckMaxRequestHeadersKB(opts.MaxRequestHeadersKB); err != nil {
		return nil, err
	}
	res = &Resources{}
	httpAddr, err := socketAddress(opts.HTTPAddress)
	if err != nil {
		return nil, fmt.Errorf("http address: %w", err)
	}
	res.Listeners = append(res.Listeners, httpListener(httpAddr, opts))
	res.Routes = append(res.Routes, httpRouteConfig(g.HTTP, opts))
	if len(g.HTTPS) > 0 {
		httpsAddr, err := socketAddress(opts.HTTPSAddress)
		if err != nil {
			return nil, fmt.Errorf("https address: %w", err)
		}
		res.Listeners = append(res.Listeners, httpsListener(httpsAddr, g.HTTPS, opts))
		secrets := map[string]bool{}
		for _, svh := range g.HTTPS {
			if servesHTTP(svh) {
				res.Routes = append(res.Routes, httpsRouteConfig(svh, opts))
			}
			if terminatesTLS(svh) && !secrets[svh.Secret.Name] {
				secrets[svh.Secret.Name] = true
				res.Secrets = append(res.Secrets, secret(svh.Secret))
			}
		}
	}
	for _, c := range g.Clusters() {
		res.Clusters = append(res.Clusters, cluster(c, opts.ConnectTimeout))
		if c.ExternalName == "" {
			res.Endpoints = append(res.Endpoints, loadAssignment(c))
		}
	}
	if err := res.validate(); err != nil {
		return nil, err
	}
	return res, nil
}

func (r *Resources) validate() error {
	for _, group := range [][]types.Resource{r.Listeners, r.Routes, r.Clusters, r.Endpoints, r.Secrets} {
		for _, res := range group {
			if err := res.(validatable).ValidateAll(); err != nil {
				return fmt.Errorf("translator produced an invalid %T: %w", res, err)
			}
		}
	}
	return nil
}

type hostPort struct {
	host string
	port uint32
}

func socketAddress(addr string) (hostPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return hostPort{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return hostPort{}, fmt.Errorf("port %q: %w", port, err)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return hostPort{host: host, port: uint32(p)}, nil
}
