package cli

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// globalFlags adds the flags of the installation's listener and cluster settings (run
// and serve; Contour keeps them in its configuration file); the function it returns is
// what they configure, or what is wrong with them.
func globalFlags(fs *flag.FlagSet) func() (translate.Global, error) {
	var g translate.Global
	idle := &optionalDuration{}
	fs.Var(idle, "stream-idle-timeout", "how long a request may see no activity (no bytes either way) before it is answered 408 or reset (`DURATION`; 0 or infinity: never; default Envoy's 5m); a route's timeoutPolicy.idle overrides it")
	conn := connectionTimeoutFlags(fs)
	server := fs.String("server-header-transformation", string(translate.ServerHeaderOverwrite), "the Server header of responses: overwrite (always \"portico\"), append_if_absent (the upstream's, else \"portico\") or pass_through (the upstream's, or none)")
	fs.BoolVar(&g.DisableMergeSlashes, "disable-merge-slashes", false, "keep repeated slashes in request paths (by default \"//a//b\" is routed and forwarded as \"/a/b\", as Contour does)")
	fs.BoolVar(&g.UseProxyProtocol, "use-proxy-protocol", false, "expect the PROXY protocol header (version 1 or 2) that a TCP load balancer such as AWS's NLB or HAProxy sends first on every connection, on every listener, and take the client's address from it (X-Forwarded-For, IP filters, the access log); a connection without one is closed, as Contour's --use-proxy-protocol does")
	fs.BoolVar(&g.StripTrailingHostDot, "strip-trailing-host-dot", false, "route a Host with a trailing dot (\"example.com.\") as the name without it")
	fs.StringVar(&g.MinTLSVersion, "tls-minimum-protocol-version", "", "lowest TLS version of every HTTPS host (1.2 or 1.3; default 1.2); an HTTPProxy's tls.minimumProtocolVersion can raise it, not lower it")
	fs.StringVar(&g.MaxTLSVersion, "tls-maximum-protocol-version", "", "highest TLS version of every HTTPS host (1.2 or 1.3; default 1.3)")
	ciphers := fs.String("tls-cipher-suites", "", "comma-separated TLS 1.2 cipher suites clients may use on every HTTPS host, OpenSSL names as Contour's tls.cipher-suites (such as ECDHE-RSA-AES256-GCM-SHA384, or a group [A|B]); default Envoy's own (Go's on the embedded proxy); Contour's default is "+strings.Join(translate.DefaultCipherSuites, ","))
	fs.DurationVar(&g.ConnectTimeout, "connect-timeout", 2*time.Second, "how long a connection to a backend may take to open")
	fs.StringVar(&g.UpstreamMinTLSVersion, "upstream-tls-minimum-protocol-version", "", "lowest TLS version of connections to backends (1.2 or 1.3; default 1.2)")
	fs.StringVar(&g.UpstreamMaxTLSVersion, "upstream-tls-maximum-protocol-version", "", "highest TLS version of connections to backends (1.2 or 1.3; default 1.3, as Contour's)")
	clientCert := fs.String("envoy-client-certificate", "", "NAMESPACE/NAME of a kubernetes.io/tls Secret whose certificate is presented to backends over TLS (tls and h2 services), as Contour's tls.envoy-client-certificate (default: none)")
	upstreamCiphers := fs.String("upstream-tls-cipher-suites", "", "comma-separated TLS 1.2 cipher suites offered to backends, as --tls-cipher-suites (default Envoy's own, Go's on the embedded proxy)")
	fs.StringVar(&g.DNSLookupFamily, "dns-lookup-family", "auto", "address family of ExternalName Services' DNS answers: auto, v4, v6 or all")
	compression := fs.String("compression", string(translate.CompressionGzip), "how responses are compressed for clients that accept it, as Contour's compression.algorithm: gzip, brotli, zstd or disabled")
	breakerFlags(fs, &g.CircuitBreakers)
	versions := fs.String("default-http-versions", "", "comma-separated HTTP versions clients may speak to every listener, HTTP/1.1 and HTTP/2 (default both); an HTTPProxy's spec.httpVersions replaces them for its host")
	return func() (translate.Global, error) {
		g.ServerHeader = translate.ServerHeaderTransformation(*server)
		g.StreamIdleTimeout = idle.value()
		g.Compression = translate.Compression(*compression)
		g.Connection = conn()
		g.CipherSuites, g.UpstreamCipherSuites = uniqueList(*ciphers), uniqueList(*upstreamCiphers)
		var err error
		if g.UpstreamClientCertificate, err = secretRef("--envoy-client-certificate", *clientCert); err != nil {
			return g, err
		}
		if g.DefaultHTTPVersions, err = parseHTTPVersions(*versions); err != nil {
			return g, fmt.Errorf("--default-http-versions: %w", err)
		}
		if err := translate.CheckGlobal(g); err != nil {
			return g, err
		}
		return g, nil
	}
}

// breakerFlags adds the flags of the circuit breakers of Services whose annotations set
// none (Contour's cluster.circuit-breakers).
func breakerFlags(fs *flag.FlagSet, cb *dag.CircuitBreakers) {
	for _, f := range []struct {
		name, what string
		limit      *uint32
	}{
		{"max-connections", "connections to a Service port's endpoints (over it, requests wait as pending)", &cb.MaxConnections},
		{"max-pending-requests", "requests waiting for a connection to a Service port (over it: 503)", &cb.MaxPendingRequests},
		{"max-requests", "requests in flight to a Service port (over it: 503)", &cb.MaxRequests},
		{"max-retries", "retries in flight to a Service port", &cb.MaxRetries},
		{"per-host-max-connections", "connections to each endpoint of a Service port", &cb.PerHostMaxConnections},
	} {
		fs.Func("default-"+f.name, "circuit breaker: most "+f.what+" where the Service's projectcontour.io/"+f.name+" annotation sets none (`N`; default 0: Envoy's default)", func(s string) error {
			n, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return fmt.Errorf("%q is not a whole number from 0 to 4294967295", s)
			}
			*f.limit = uint32(n)
			return nil
		})
	}
}

// uniqueList is the comma-separated list s without repeats, in order.
func uniqueList(s string) []string {
	var out []string
	for _, v := range splitList(s) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// connectionTimeoutFlags adds the flags of client connections' timeouts (Contour's
// timeouts section); the function it returns is what they configure.
func connectionTimeoutFlags(fs *flag.FlagSet) func() translate.ConnectionTimeouts {
	idle := &optionalDuration{d: defaultConnectionIdleTimeout, set: true}
	maxAge, drain, delayed, request := &optionalDuration{}, &optionalDuration{}, &optionalDuration{}, &optionalDuration{}
	fs.Var(idle, "connection-idle-timeout", "how long a client connection may stay open without a request in progress before it is closed (`DURATION`; 0 or infinity: never); Contour's default, 60s, where Envoy's own is 1h")
	fs.Var(maxAge, "max-connection-duration", "how long a client connection may live: once this old it is closed when idle, and drained when not (HTTP/1.1: \"Connection: close\" on its next response; HTTP/2: GOAWAY after --connection-shutdown-grace-period) (`DURATION`; 0 or infinity: no limit, the default)")
	fs.Var(drain, "connection-shutdown-grace-period", "how long an HTTP/2 connection being drained still takes new requests before it refuses them (`DURATION`; default Envoy's 5s)")
	fs.Var(delayed, "delayed-close-timeout", "how long a connection Portico closes waits for the client to close its side first, so that the client reads the whole last response (`DURATION`; 0 or infinity: close at once; default Envoy's 1s)")
	fs.Var(request, "request-timeout", "how long a whole request (headers and body) may take to arrive before it is answered 408 (`DURATION`; 0 or infinity: no limit, the default); not the time to the response: that is a route's timeoutPolicy.response")
	return func() translate.ConnectionTimeouts {
		return translate.ConnectionTimeouts{Idle: idle.value(), MaxDuration: maxAge.value(), Drain: drain.value(), DelayedClose: delayed.value(), Request: request.value()}
	}
}

// defaultConnectionIdleTimeout is Contour's connection-idle-timeout default.
const defaultConnectionIdleTimeout = 60 * time.Second

// parseHTTPVersions parses a comma-separated list of HTTP/1.1 and HTTP/2 (any case,
// Contour's spelling); "" is none (both).
func parseHTTPVersions(s string) ([]dag.HTTPVersion, error) {
	var out []dag.HTTPVersion
	for _, v := range splitList(s) {
		var version dag.HTTPVersion
		switch strings.ToLower(v) {
		case "http/1.1":
			version = dag.HTTP1
		case "http/2":
			version = dag.HTTP2
		default:
			return nil, fmt.Errorf("unknown HTTP version %q: use HTTP/1.1 or HTTP/2", v)
		}
		if !slices.Contains(out, version) {
			out = append(out, version)
		}
	}
	slices.Sort(out)
	return out, nil
}

// headersPolicyFlags adds --request-headers-policy and --response-headers-policy (run
// and serve); the function it returns is what they configure, or what is wrong.
func headersPolicyFlags(fs *flag.FlagSet) func() (dag.DefaultHeaders, error) {
	req := fs.String("request-headers-policy", "", "headers policy of the requests to every HTTPProxy service (`YAML or JSON`, as Contour's policy.request-headers: '{set: {X-Env: prod}, remove: [X-Debug]}'); a service's or route's own policy wins")
	resp := fs.String("response-headers-policy", "", "headers policy of the responses of every HTTPProxy service (`YAML or JSON`, as --request-headers-policy)")
	ingress := fs.Bool("headers-policy-ingress", false, "apply --request-headers-policy and --response-headers-policy to the backends of Ingress rules too (Contour's applyToIngress)")
	return func() (dag.DefaultHeaders, error) {
		d := dag.DefaultHeaders{ApplyToIngress: *ingress}
		var err error
		if d.Request, err = parseHeadersPolicy(*req); err != nil {
			return d, fmt.Errorf("--request-headers-policy: %w", err)
		}
		if d.Response, err = parseHeadersPolicy(*resp); err != nil {
			return d, fmt.Errorf("--response-headers-policy: %w", err)
		}
		return d, dag.CheckDefaultHeaders(d)
	}
}

// parseHeadersPolicy parses Contour's form of a headers policy, {set: {NAME: VALUE},
// remove: [NAME]}; "" is none.
func parseHeadersPolicy(s string) (*contourv1.HeadersPolicy, error) {
	if s == "" {
		return nil, nil
	}
	var p struct {
		Set    map[string]string `json:"set"`
		Remove []string          `json:"remove"`
	}
	if err := yaml.UnmarshalStrict([]byte(s), &p); err != nil {
		return nil, err
	}
	out := &contourv1.HeadersPolicy{Remove: p.Remove}
	for _, name := range slices.Sorted(maps.Keys(p.Set)) {
		out.Set = append(out.Set, contourv1.HeaderValue{Name: name, Value: p.Set[name]})
	}
	return out, nil
}

// optionalDuration is a duration flag that may stay unset (nil), where "infinity" (or
// "infinite", Contour's spellings) is 0.
type optionalDuration struct {
	d   time.Duration
	set bool
}

func (o *optionalDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(s string) error {
	d, err := parseTimeout(s)
	if err != nil {
		return err
	}
	o.d, o.set = d, true
	return nil
}

func (o *optionalDuration) value() *time.Duration {
	if !o.set {
		return nil
	}
	d := o.d
	return &d
}

// parseTimeout parses a Go duration, or "infinity"/"infinite" (no timeout: 0).
func parseTimeout(s string) (time.Duration, error) {
	switch s {
	case "infinity", "infinite":
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 30s, 5m or 1h30m (or infinity)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}
