package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"google.golang.org/protobuf/proto"
)

// The upstream protocol of a cluster: HTTP/1.1 by default, or what the
// envoy.extensions.upstreams.http.v3.HttpProtocolOptions of its
// typed_extension_protocol_options say: explicit_http_config HTTP/1.1 or
// HTTP/2 (over TLS negotiated as "h2" by ALPN, in clear text h2c with prior
// knowledge), and common_http_protocol_options.idle_timeout.

// The keys typed_extension_protocol_options accepts for HttpProtocolOptions:
// its type name and its extension name.
const (
	HTTPProtocolOptionsKey     = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	httpProtocolOptionsExtName = "envoy.upstreams.http.http_protocol_options"
)

// defaultUpstreamIdleTimeout is how long an idle pooled upstream connection
// is kept when the cluster sets no idle_timeout: the shared transport's value,
// so that every cluster behaves alike (Envoy's default is 1 hour).
const defaultUpstreamIdleTimeout = 60 * time.Second

type upstreamProtocol int

const (
	protoHTTP1 upstreamProtocol = iota
	ProtoHTTP2
)

func (p upstreamProtocol) String() string {
	if p == ProtoHTTP2 {
		return "HTTP/2"
	}
	return "HTTP/1.1"
}

// ProtocolSpec is a cluster's validated HttpProtocolOptions.
type ProtocolSpec struct {
	Protocol    upstreamProtocol
	IdleTimeout time.Duration // 0 disables it (with hasIdleTimeout)
	// hasIdleTimeout: common_http_protocol_options.idle_timeout is set.
	HasIdleTimeout bool
}

// convertProtocolOptions reads typed_extension_protocol_options.
func convertProtocolOptions(c *clusterv3.Cluster) (ProtocolSpec, error) {
	var spec ProtocolSpec
	for key, a := range c.GetTypedExtensionProtocolOptions() {
		if key != HTTPProtocolOptionsKey && key != httpProtocolOptionsExtName {
			return spec, fmt.Errorf("typed_extension_protocol_options %q is not supported (only %s)", key, HTTPProtocolOptionsKey)
		}
		var o httpv3.HttpProtocolOptions
		if !a.MessageIs(&o) {
			return spec, fmt.Errorf("typed_extension_protocol_options %q: %s is not an HttpProtocolOptions", key, a.GetTypeUrl())
		}
		if err := a.UnmarshalTo(&o); err != nil {
			return spec, fmt.Errorf("typed_extension_protocol_options %q: %w", key, err)
		}
		if err := o.ValidateAll(); err != nil {
			return spec, fmt.Errorf("typed_extension_protocol_options %q: invalid: %w", key, err)
		}
		if err := spec.set(&o); err != nil {
			return spec, fmt.Errorf("typed_extension_protocol_options %q: %w", key, err)
		}
	}
	return spec, nil
}

func (s *ProtocolSpec) set(o *httpv3.HttpProtocolOptions) error {
	if err := xdsconv.Unsupported(
		xdsconv.Set("upstream_http_protocol_options", o.GetUpstreamHttpProtocolOptions() != nil),
		xdsconv.Set("http_filters", len(o.GetHttpFilters()) > 0),
		xdsconv.Set("header_validation_config", o.GetHeaderValidationConfig() != nil),
		xdsconv.Set("outlier_detection", o.GetOutlierDetection() != nil),
		xdsconv.Set("request_mirror_policies", len(o.GetRequestMirrorPolicies()) > 0),
		xdsconv.Set("hash_policy", len(o.GetHashPolicy()) > 0),
		xdsconv.Set("retry_policy", o.GetRetryPolicy() != nil),
		xdsconv.Set("use_downstream_protocol_config", o.GetUseDownstreamProtocolConfig() != nil),
		xdsconv.Set("auto_config", o.GetAutoConfig() != nil),
	); err != nil {
		return err
	}
	if e := o.GetExplicitHttpConfig(); e != nil {
		switch {
		case e.GetHttpProtocolOptions() != nil:
			if !proto.Equal(e.GetHttpProtocolOptions(), &corev3.Http1ProtocolOptions{}) {
				return errors.New("explicit_http_config.http_protocol_options: only an empty Http1ProtocolOptions is supported")
			}
			s.Protocol = protoHTTP1
		case e.GetHttp2ProtocolOptions() != nil:
			if !proto.Equal(e.GetHttp2ProtocolOptions(), &corev3.Http2ProtocolOptions{}) {
				return errors.New("explicit_http_config.http2_protocol_options: only an empty Http2ProtocolOptions is supported")
			}
			s.Protocol = ProtoHTTP2
		default:
			return errors.New("explicit_http_config: only http_protocol_options and http2_protocol_options are supported")
		}
	}
	if co := o.GetCommonHttpProtocolOptions(); co != nil {
		if err := xdsconv.Unsupported(
			xdsconv.Set("common_http_protocol_options.max_connection_duration", co.GetMaxConnectionDuration() != nil),
			xdsconv.Set("common_http_protocol_options.max_connection_duration_jitter", co.GetMaxConnectionDurationJitter() != nil),
			xdsconv.Set("common_http_protocol_options.max_headers_count", co.GetMaxHeadersCount() != nil),
			xdsconv.Set("common_http_protocol_options.max_response_headers_kb", co.GetMaxResponseHeadersKb() != nil),
			xdsconv.Set("common_http_protocol_options.max_stream_duration", co.GetMaxStreamDuration() != nil),
			xdsconv.Set("common_http_protocol_options.headers_with_underscores_action "+co.GetHeadersWithUnderscoresAction().String(),
				co.GetHeadersWithUnderscoresAction() != corev3.HttpProtocolOptions_ALLOW),
			xdsconv.Set("common_http_protocol_options.max_requests_per_connection", co.GetMaxRequestsPerConnection() != nil),
		); err != nil {
			return err
		}
		if d := co.GetIdleTimeout(); d != nil {
			s.IdleTimeout, s.HasIdleTimeout = d.AsDuration(), true
		}
	}
	return nil
}

// checkProtocolALPN refuses an ALPN list that does not fit the protocol the
// cluster speaks: Envoy offers what alpn_protocols says and speaks the
// configured protocol whatever is negotiated, which fails when they differ.
func checkProtocolALPN(p upstreamProtocol, tlsSpec *upstreamTLSSpec) error {
	if tlsSpec == nil {
		return nil
	}
	switch p {
	case ProtoHTTP2:
		if len(tlsSpec.alpn) != 1 || tlsSpec.alpn[0] != "h2" {
			return fmt.Errorf("HTTP/2 over TLS needs alpn_protocols [\"h2\"], got %q", tlsSpec.alpn)
		}
	default:
		for _, a := range tlsSpec.alpn {
			if a != "http/1.1" {
				return fmt.Errorf("an HTTP/1.1 cluster cannot offer ALPN %q (set explicit_http_config.http2_protocol_options for HTTP/2)", a)
			}
		}
	}
	return nil
}

// transportKey is what a cluster's own transport is built from; a cluster
// keeps its transport (and its pooled connections) while the key is unchanged.
type transportKey struct {
	tls         string // upstreamTLSSpec.key; "" for clear text
	protocol    upstreamProtocol
	idleTimeout time.Duration
}

// needsOwnTransport reports whether a cluster cannot use the shared HTTP/1.1
// clear-text transport.
func (s *ClusterSpec) needsOwnTransport() bool {
	return s.TLS != nil || s.Protocol.Protocol != protoHTTP1 || s.Protocol.HasIdleTimeout
}

func (s *ClusterSpec) transportKey() transportKey {
	k := transportKey{protocol: s.Protocol.Protocol, idleTimeout: defaultUpstreamIdleTimeout}
	if s.TLS != nil {
		k.tls = s.TLS.key
	}
	if s.Protocol.HasIdleTimeout {
		k.idleTimeout = s.Protocol.IdleTimeout
	}
	return k
}

// clusterTransport is a cluster's own transport, kept in its ClusterState:
// an HTTP/1.1 cluster's is the codec's client (client) in front of an
// http.Transport (rt) for what it does not exchange itself; an HTTP/2
// cluster's is Go's HTTP/2 transport (rt).
type clusterTransport struct {
	key    transportKey
	rt     *http.Transport
	client *HTTP1Client // nil for HTTP/2
}

func (t *clusterTransport) roundTripper() http.RoundTripper {
	if t.client != nil {
		return t.client
	}
	return interimTracing{t.rt}
}

func (t *clusterTransport) closeIdleConnections() {
	if t.client != nil {
		t.client.CloseIdleConnections() // the fallback's too
		return
	}
	t.rt.CloseIdleConnections()
}

// newClusterTransport builds the transport of a cluster with upstream TLS, HTTP/2
// or an idle_timeout. Connections are pooled per endpoint as in the shared one;
// dial settings (connect_timeout, dns_lookup_family, TLS) come from the
// request's cluster, whose TLS settings are those of the key.
func newClusterTransport(key transportKey) *clusterTransport {
	protocols := new(http.Protocols)
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialUpstream,
		MaxIdleConnsPerHost:   maxIdleConnsPerEndpoint,
		MaxIdleConns:          0,
		IdleConnTimeout:       key.idleTimeout, // 0: never closed for idleness, as Envoy's 0s
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		Protocols:             protocols,
	}
	switch {
	case key.protocol == protoHTTP1:
		protocols.SetHTTP1(true)
	case key.tls != "":
		protocols.SetHTTP2(true)
	default:
		protocols.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	}
	if key.tls != "" {
		requireH2 := key.protocol == ProtoHTTP2
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c := clusterFrom(ctx)
			if c == nil || c.TLS == nil {
				return nil, errors.New("no upstream TLS settings for this connection")
			}
			return DialTLS(ctx, c.Dialer, addr, c.TLS, requireH2)
		}
	}
	ct := &clusterTransport{key: key, rt: tr}
	switch {
	case key.protocol != protoHTTP1:
	case key.tls != "":
		// The pool is the cluster's, whose TLS settings are the key's: a
		// connection is never reused under other settings (a new key makes a
		// new transport).
		ct.client = newHTTP1Client(tr, "https", tr.DialTLSContext)
	default:
		ct.client = NewHTTP1Client(tr)
	}
	return ct
}

// TransportFor returns the cluster's transport for spec, reusing the current
// one while its settings are unchanged; nil when the shared transport serves
// the cluster. A replaced transport's idle connections are closed; those in
// use finish their requests. Called by the ADS goroutine only.
func (cs *ClusterState) TransportFor(spec *ClusterSpec) http.RoundTripper {
	if !spec.needsOwnTransport() {
		if cs.transport != nil {
			cs.transport.closeIdleConnections()
			cs.transport = nil
		}
		return nil
	}
	key := spec.transportKey()
	if cs.transport == nil || cs.transport.key != key {
		if cs.transport != nil {
			cs.transport.closeIdleConnections()
		}
		cs.transport = newClusterTransport(key)
	}
	return cs.transport.roundTripper()
}
