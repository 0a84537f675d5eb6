// Package translate turns a routing graph into Envoy xDS v3 resources, in the shapes that
// docs/dev/xds-contract.md describes. Every resource it returns has passed ValidateAll:
// an invalid resource is a translator bug, reported as an error rather than published.
package translate

import (
	"fmt"
	"net"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/parallel"
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
	// Global are the installation's settings (Contour's configuration file).
	Global
	HTTPAddress  string // host:port, default 0.0.0.0:8080
	HTTPSAddress string // host:port, default 0.0.0.0:8443
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
	// NumTrustedHops is how many proxies in front of Portico are trusted to append
	// to X-Forwarded-For (HCM xff_num_trusted_hops): the client's address is the
	// NumTrustedHops-th address from its right end; 0 makes it the connection's.
	NumTrustedHops uint32
	// RateLimit, when set, is the global rate limit service the routes' global
	// rate limit policies are sent to.
	RateLimit *RateLimitService

	// extensions are the graph's (dag.Graph.Extensions): the installation's
	// ExtensionServices, which the connection managers' filters use.
	extensions *dag.Extensions

	// keepHostPort is set for the listeners of Gateways (translateGateways): the Host
	// keeps its port, which virtual host matching ignores, and goes upstream as the
	// client sent it (Gateway API). The shared listeners strip it, as Contour does.
	keepHostPort bool
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
	opts = opts.withDefaults()
	if err := CheckMaxRequestHeadersKB(opts.MaxRequestHeadersKB); err != nil {
		return nil, err
	}
	if err := CheckRateLimitService(opts.RateLimit); err != nil {
		return nil, err
	}
	err = recoverInvalid(func() (err error) {
		res, err = translate(g, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func translate(g *dag.Graph, opts Options) (*Resources, error) {
	opts.extensions = g.Extensions
	opts.clientSecret = clientSecretName(g)
	httpAddr, err := socketAddress(opts.HTTPAddress)
	if err != nil {
		return nil, fmt.Errorf("http address: %w", err)
	}
	l := httpListener(httpAddr, opts)
	if err := validateAll(l); err != nil {
		return nil, err
	}
	res := &Resources{Listeners: []types.Resource{l}}
	routes, err := httpRouteConfig(g.HTTP, opts)
	if err != nil {
		return nil, err
	}
	res.Routes = append(res.Routes, routes)
	if len(g.HTTPS) > 0 {
		httpsAddr, err := socketAddress(opts.HTTPSAddress)
		if err != nil {
			return nil, fmt.Errorf("https address: %w", err)
		}
		if err := translateSecureHosts(httpsAddr, g.HTTPS, opts, res); err != nil {
			return nil, err
		}
	}
	if err := translateGateways(g.Gateways, opts, res); err != nil {
		return nil, err
	}
	clusters := g.Clusters()
	if c := rateLimitCluster(opts.RateLimit); c != nil {
		clusters = append(clusters, c)
	}
	if err := translateClusters(clusters, opts, res); err != nil {
		return nil, err
	}
	if c := g.UpstreamClientCertificate; c != nil {
		m := secret(c)
		if err := validateAll(m); err != nil {
			return nil, err
		}
		addClientSecret(res, m)
	}
	return res, nil
}

// translateSecureHosts adds the HTTPS listener, the secure hosts' route configurations
// and their secrets (once per name), each validated.
func translateSecureHosts(addr hostPort, hosts []*dag.SecureVirtualHost, opts Options, res *Resources) error {
	out := make([]secureHost, len(hosts))
	err := parallel.Do(len(hosts), func(i int) (err error) {
		out[i], err = translateSecureHost(hosts[i], opts)
		return err
	})
	if err != nil {
		return err
	}
	l := httpsListener(addr, opts.Global)
	if err := validateAll(l); err != nil {
		return err
	}
	res.Listeners = append(res.Listeners, l)
	secrets := map[string]bool{}
	for _, h := range out {
		h.addTo(l, res, secrets)
	}
	return nil
}

// addTo adds a secure host's filter chain to l, and its route configuration and
// secret to res, the secret unless one of its name is in secrets already.
func (h secureHost) addTo(l *listenerv3.Listener, res *Resources, secrets map[string]bool) {
	if h.chain != nil {
		l.FilterChains = append(l.FilterChains, h.chain)
	}
	if h.routes != nil {
		res.Routes = append(res.Routes, h.routes)
	}
	addSecrets(res, secrets, h.secret, h.more)
}

// addSecrets adds a host's secret (nil for none) and more to res, those not in secrets
// yet, which it records.
func addSecrets(res *Resources, secrets map[string]bool, secret *tlsv3.Secret, more []*tlsv3.Secret) {
	for _, s := range append([]*tlsv3.Secret{secret}, more...) {
		if s != nil && !secrets[s.Name] {
			secrets[s.Name] = true
			res.Secrets = append(res.Secrets, s)
		}
	}
}

// secureHost is the translation of one secure virtual host: its route configuration
// (nil unless it serves HTTP), filter chain (nil when it has none) and secret (nil unless
// it terminates TLS).
type secureHost struct {
	routes *routev3.RouteConfiguration
	chain  *listenerv3.FilterChain
	secret *tlsv3.Secret
	// more are the host's further certificates (dag.SecureVirtualHost.MoreSecrets).
	more []*tlsv3.Secret
}

// translateSecureHost translates svh, a host of the shared HTTPS listener, validating
// each part.
func translateSecureHost(svh *dag.SecureVirtualHost, opts Options) (secureHost, error) {
	return translateSecureHostAs(svh, ListenerHTTPS, RouteHTTPS(svh.Name), sharedVirtualHost, opts)
}

// translateSecureHostAs translates svh on the listener statPrefix names, with its
// routes in the route configuration routeName, its virtual hosts made by vhost.
func translateSecureHostAs(svh *dag.SecureVirtualHost, statPrefix, routeName string, vhost vhostFunc, opts Options) (secureHost, error) {
	h := secureHost{chain: secureFilterChain(svh, statPrefix, routeName, opts)}
	if h.chain != nil {
		if err := validateAll(h.chain); err != nil {
			return h, err
		}
	}
	if servesHTTP(svh) {
		h.routes = httpsRouteConfig(routeName, svh, vhost, opts)
		if err := validateAll(h.routes); err != nil {
			return h, err
		}
	}
	if terminatesTLS(svh) {
		h.secret = secret(svh.Secret)
		if err := validateAll(h.secret); err != nil {
			return h, err
		}
		for _, s := range svh.MoreSecrets {
			m := secret(s)
			if err := validateAll(m); err != nil {
				return h, err
			}
			h.more = append(h.more, m)
		}
	}
	return h, nil
}

// translateClusters adds the clusters and the load assignments of those that are not
// ExternalName, in the order of clusters, each validated.
func translateClusters(clusters []*dag.Cluster, opts Options, res *Resources) error {
	out := make([]translatedCluster, len(clusters))
	err := parallel.Do(len(clusters), func(i int) (err error) {
		out[i], err = clusterAndEndpoints(clusters[i], opts.Global)
		return err
	})
	if err != nil {
		return err
	}
	res.Clusters = make([]types.Resource, 0, len(out))
	res.Endpoints = make([]types.Resource, 0, len(out))
	for _, c := range out {
		res.Clusters = append(res.Clusters, c.cluster)
		if c.cla != nil {
			res.Endpoints = append(res.Endpoints, c.cla)
		}
	}
	return nil
}

// translatedCluster is a cluster and its load assignment (nil for ExternalName).
type translatedCluster struct {
	cluster *clusterv3.Cluster
	cla     *endpointv3.ClusterLoadAssignment
}

// clusterAndEndpoints translates c, validating the cluster and its load assignment.
func clusterAndEndpoints(c *dag.Cluster, g Global) (translatedCluster, error) {
	out := translatedCluster{cluster: cluster(c, g)}
	if err := validateAll(out.cluster); err != nil {
		return out, err
	}
	if c.ExternalName == "" {
		out.cla = loadAssignment(c)
		if err := validateAll(out.cla); err != nil {
			return out, err
		}
	}
	return out, nil
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
