package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	proxyprotocolv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/proxy/hcm"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"github.com/portico-dev/portico/internal/proxy/listener"
)

// listenerSpec is a validated Listener.
type listenerSpec struct {
	name    string
	address string // host:port of the Listener's socket address
	// tls: the chains are chosen by SNI (TLS termination or passthrough);
	// otherwise the listener has one plaintext HTTP chain.
	tls          bool
	tlsInspector bool // the envoy.filters.listener.tls_inspector listener filter
	// proxyProtocol: the envoy.filters.listener.proxy_protocol listener filter;
	// nil without it.
	proxyProtocol *listener.ProxyProtocolSpec
	// filtersTimeout bounds the wait for the ClientHello (listener_filters_timeout,
	// default 15s, 0 = none); on expiry the connection is closed, or handed to the
	// default chain with continueOnTimeout.
	filtersTimeout    time.Duration
	continueOnTimeout bool
	chains            []*chainSpec
}

// defaultListenerFiltersTimeout is Envoy's listener_filters_timeout default.
const defaultListenerFiltersTimeout = 15 * time.Second

// chainSpec is a validated filter chain: an HTTP connection manager, or a
// tcp_proxy (TLS terminated with tls set, passed through otherwise).
type chainSpec struct {
	// serverNames are the lower-cased filter_chain_match.server_names; empty
	// for the default chain of a TLS listener and for a plaintext chain.
	serverNames []string
	hcm         *hcm.Spec
	tcp         *listener.TcpProxySpec
	tls         *listener.TlsSpec
}

func convertListener(l *listenerv3.Listener) (*listenerSpec, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("additional_addresses", len(l.GetAdditionalAddresses()) > 0),
		xdsconv.Set("fcds_config", l.GetFcdsConfig() != nil),
		xdsconv.Set("filter_chain_matcher", l.GetFilterChainMatcher() != nil),
		xdsconv.Set("use_original_dst", l.GetUseOriginalDst().GetValue()),
		xdsconv.Set("default_filter_chain", l.GetDefaultFilterChain() != nil),
		xdsconv.Set("transparent", l.GetTransparent().GetValue()),
		xdsconv.Set("freebind", l.GetFreebind().GetValue()),
		xdsconv.Set("socket_options", len(l.GetSocketOptions()) > 0),
		xdsconv.Set("udp_listener_config", l.GetUdpListenerConfig() != nil),
		xdsconv.Set("api_listener", l.GetApiListener() != nil),
		xdsconv.Set("internal_listener", l.GetListenerSpecifier() != nil),
		xdsconv.Set("access_log", len(l.GetAccessLog()) > 0),
		xdsconv.Set("bind_to_port=false", l.GetBindToPort() != nil && !l.GetBindToPort().GetValue()),
		xdsconv.Set("enable_mptcp", l.GetEnableMptcp()),
	); err != nil {
		return nil, err
	}
	addr, err := xdsconv.TCPSocketAddress(l.GetAddress())
	if err != nil {
		return nil, fmt.Errorf("address: %w", err)
	}
	ls := &listenerSpec{name: l.GetName(), address: addr, filtersTimeout: defaultListenerFiltersTimeout,
		continueOnTimeout: l.GetContinueOnListenerFiltersTimeout()}
	for _, lf := range l.GetListenerFilters() {
		if err := ls.addListenerFilter(lf); err != nil {
			return nil, err
		}
	}
	if d := l.GetListenerFiltersTimeout(); d != nil {
		ls.filtersTimeout = d.AsDuration()
	}
	for i, fc := range l.GetFilterChains() {
		cs, err := convertFilterChain(fc)
		if err != nil {
			return nil, fmt.Errorf("filter chain #%d %q: %w", i, fc.GetName(), err)
		}
		ls.chains = append(ls.chains, cs)
	}
	if err := ls.checkChains(); err != nil {
		return nil, err
	}
	return ls, nil
}

// checkChains enforces what the proxy can select between: either one
// plaintext HTTP chain, or chains told apart by SNI alone: TLS-terminating
// HTTP and tcp_proxy chains, and tcp_proxy chains passing TLS through.
func (ls *listenerSpec) checkChains() error {
	if len(ls.chains) == 0 {
		return errors.New("no filter chains")
	}
	plainHTTP := func(c *chainSpec) bool { return c.tls == nil && c.hcm != nil }
	ls.tls = !plainHTTP(ls.chains[0])
	seen := make(map[string]bool)
	for _, c := range ls.chains {
		if plainHTTP(c) == ls.tls {
			return errors.New("mixing TLS and plaintext filter chains is not supported")
		}
		if c.tcp != nil && !ls.tlsInspector {
			// The chain is chosen by the ClientHello's SNI, which Envoy only
			// reads with the inspector (the proxy reads it the same way).
			return errors.New("a tcp_proxy filter chain needs the envoy.filters.listener.tls_inspector listener filter")
		}
		names := c.serverNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, n := range names {
			if seen[n] {
				if n == "" {
					return errors.New("more than one filter chain without server_names")
				}
				return fmt.Errorf("server name %q is matched by more than one filter chain", n)
			}
			seen[n] = true
		}
	}
	if !ls.tls && len(ls.chains) > 1 {
		return errors.New("a plaintext listener must have exactly one filter chain")
	}
	return nil
}

// addListenerFilter adds one of the listener filters the proxy knows, in
// Envoy's order: the PROXY protocol header comes before the ClientHello.
func (ls *listenerSpec) addListenerFilter(lf *listenerv3.ListenerFilter) error {
	if lf.GetFilterDisabled() != nil {
		return fmt.Errorf("listener filter %q: filter_disabled is not supported", lf.GetName())
	}
	tc := lf.GetTypedConfig()
	switch {
	case tc == nil && lf.GetName() == wellknown.TlsInspector, tc != nil && tc.MessageIs(&tlsinspectorv3.TlsInspector{}):
		// tls_inspector only extracts SNI and ALPN, which Go's TLS stack does anyway.
		ls.tlsInspector = true
	case tc == nil && lf.GetName() == wellknown.ProxyProtocol, tc != nil && tc.MessageIs(&proxyprotocolv3.ProxyProtocol{}):
		if ls.tlsInspector {
			return fmt.Errorf("listener filter %q must come before the TLS inspector: the PROXY protocol header precedes the ClientHello", lf.GetName())
		}
		if ls.proxyProtocol != nil {
			return fmt.Errorf("listener filter %q appears twice", lf.GetName())
		}
		var pp proxyprotocolv3.ProxyProtocol
		if tc != nil {
			if err := tc.UnmarshalTo(&pp); err != nil {
				return fmt.Errorf("decode ProxyProtocol: %w", err)
			}
		}
		spec, err := convertProxyProtocol(&pp)
		if err != nil {
			return fmt.Errorf("listener filter %q: %w", lf.GetName(), err)
		}
		ls.proxyProtocol = spec
	case tc != nil:
		return fmt.Errorf("listener filter %q (%s) is not supported", lf.GetName(), tc.GetTypeUrl())
	default:
		return fmt.Errorf("listener filter %q is not supported", lf.GetName())
	}
	return nil
}

// convertProxyProtocol accepts the PROXY protocol filter's settings that
// change which connections are served. TLVs are checked and skipped: nothing
// in the proxy reads dynamic metadata or filter state, so rules and
// pass_through_tlvs would be promises it cannot keep.
func convertProxyProtocol(pp *proxyprotocolv3.ProxyProtocol) (*listener.ProxyProtocolSpec, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("rules", len(pp.GetRules()) > 0),
		xdsconv.Set("pass_through_tlvs", pp.GetPassThroughTlvs() != nil),
		xdsconv.Set("tlv_location "+pp.GetTlvLocation().String(), pp.GetTlvLocation() != 0),
	); err != nil {
		return nil, err
	}
	spec := &listener.ProxyProtocolSpec{AllowWithout: pp.GetAllowRequestsWithoutProxyProtocol()}
	for _, v := range pp.GetDisallowedVersions() {
		switch v {
		case corev3.ProxyProtocolConfig_V1:
			spec.DisallowV1 = true
		case corev3.ProxyProtocolConfig_V2:
			spec.DisallowV2 = true
		}
	}
	return spec, nil
}

func convertFilterChain(fc *listenerv3.FilterChain) (*chainSpec, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("use_proxy_proto", fc.GetUseProxyProto().GetValue()),
	); err != nil {
		return nil, err
	}
	cs := &chainSpec{}
	if ts := fc.GetTransportSocket(); ts != nil {
		t, err := convertDownstreamTLS(ts)
		if err != nil {
			return nil, fmt.Errorf("transport_socket: %w", err)
		}
		cs.tls = t
	}
	if m := fc.GetFilterChainMatch(); m != nil {
		if err := xdsconv.Unsupported(
			xdsconv.Set("filter_chain_match.destination_port", m.GetDestinationPort() != nil),
			xdsconv.Set("filter_chain_match.prefix_ranges", len(m.GetPrefixRanges()) > 0),
			xdsconv.Set("filter_chain_match.direct_source_prefix_ranges", len(m.GetDirectSourcePrefixRanges()) > 0),
			xdsconv.Set("filter_chain_match.source_type", m.GetSourceType() != listenerv3.FilterChainMatch_ANY),
			xdsconv.Set("filter_chain_match.source_prefix_ranges", len(m.GetSourcePrefixRanges()) > 0),
			xdsconv.Set("filter_chain_match.source_ports", len(m.GetSourcePorts()) > 0),
			xdsconv.Set("filter_chain_match.application_protocols", len(m.GetApplicationProtocols()) > 0),
		); err != nil {
			return nil, err
		}
		for _, n := range m.GetServerNames() {
			n = strings.ToLower(n)
			if n == "" {
				return nil, errors.New("empty server name")
			}
			if strings.Contains(n[1:], "*") || (strings.HasPrefix(n, "*") && !strings.HasPrefix(n, "*.")) {
				return nil, fmt.Errorf("server name %q: only a leading \"*.\" wildcard is supported", n)
			}
			cs.serverNames = append(cs.serverNames, n)
		}
	}
	if len(fc.GetFilters()) != 1 {
		return nil, fmt.Errorf("exactly one network filter (the HTTP connection manager or tcp_proxy) is supported, got %d", len(fc.GetFilters()))
	}
	f := fc.GetFilters()[0]
	tc := f.GetTypedConfig()
	if tc != nil && tc.MessageIs(&tcpproxyv3.TcpProxy{}) {
		var tp tcpproxyv3.TcpProxy
		if err := tc.UnmarshalTo(&tp); err != nil {
			return nil, fmt.Errorf("decode TcpProxy: %w", err)
		}
		t, err := listener.ConvertTCPProxy(&tp)
		if err != nil {
			return nil, fmt.Errorf("tcp_proxy: %w", err)
		}
		cs.tcp = t
		// "tls" is implied by a TLS transport socket, or by server_names (only
		// a TLS ClientHello has one).
		if tp := fc.GetFilterChainMatch().GetTransportProtocol(); tp != "" && (tp != "tls" || (cs.tls == nil && len(cs.serverNames) == 0)) {
			return nil, fmt.Errorf("filter_chain_match.transport_protocol %q is not supported here", tp)
		}
		return cs, nil
	}
	switch tp := fc.GetFilterChainMatch().GetTransportProtocol(); {
	case tp == "":
	case tp == "tls" && cs.tls != nil, tp == "raw_buffer" && cs.tls == nil:
	default:
		return nil, fmt.Errorf("filter_chain_match.transport_protocol %q is not supported here", tp)
	}
	if len(cs.serverNames) > 0 && cs.tls == nil {
		return nil, errors.New("server_names on an HTTP chain without TLS")
	}
	if tc == nil || !tc.MessageIs(&hcmv3.HttpConnectionManager{}) {
		return nil, fmt.Errorf("network filter %q is not supported (only envoy.filters.network.http_connection_manager or envoy.filters.network.tcp_proxy with a typed_config)", f.GetName())
	}
	var m hcmv3.HttpConnectionManager
	if err := tc.UnmarshalTo(&m); err != nil {
		return nil, fmt.Errorf("decode HttpConnectionManager: %w", err)
	}
	h, err := hcm.Convert(&m, httpFilters)
	if err != nil {
		return nil, fmt.Errorf("http_connection_manager: %w", err)
	}
	cs.hcm = h
	return cs, nil
}

func convertDownstreamTLS(ts *corev3.TransportSocket) (*listener.TlsSpec, error) {
	tc := ts.GetTypedConfig()
	if tc == nil || !tc.MessageIs(&tlsv3.DownstreamTlsContext{}) {
		return nil, fmt.Errorf("transport socket %q is not supported (only %s with a DownstreamTlsContext)", ts.GetName(), xdsconv.TLSTransportSocketName)
	}
	var dtc tlsv3.DownstreamTlsContext
	if err := anypb.UnmarshalTo(tc, &dtc, proto.UnmarshalOptions{}); err != nil {
		return nil, fmt.Errorf("decode DownstreamTlsContext: %w", err)
	}
	if err := xdsconv.Unsupported(
		xdsconv.Set("session_ticket_keys", dtc.GetSessionTicketKeysType() != nil),
		xdsconv.Set("prefer_client_ciphers", dtc.GetPreferClientCiphers()),
	); err != nil {
		return nil, err
	}
	ctc := dtc.GetCommonTlsContext()
	if err := xdsconv.Unsupported(
		xdsconv.Set("tls_certificate_provider_instance", ctc.GetTlsCertificateProviderInstance() != nil),
		xdsconv.Set("custom_tls_certificate_selector", ctc.GetCustomTlsCertificateSelector() != nil),
		xdsconv.Set("tls_certificate_certificate_provider", ctc.GetTlsCertificateCertificateProvider() != nil),
		xdsconv.Set("tls_certificate_certificate_provider_instance", ctc.GetTlsCertificateCertificateProviderInstance() != nil),
		xdsconv.Set("custom_handshaker", ctc.GetCustomHandshaker() != nil),
		xdsconv.Set("key_log", ctc.GetKeyLog() != nil),
	); err != nil {
		return nil, err
	}
	spec := &listener.TlsSpec{}
	var err error
	if spec.Clients, err = listener.ConvertClientValidation(&dtc); err != nil {
		return nil, err
	}
	for _, alpn := range ctc.GetAlpnProtocols() {
		if alpn != "h2" && alpn != "http/1.1" {
			return nil, fmt.Errorf("ALPN protocol %q is not supported", alpn)
		}
	}
	spec.Alpn = slices.Clone(ctc.GetAlpnProtocols())
	params, err := xdsconv.TLSParams(ctc.GetTlsParams(), tls.VersionTLS13)
	if err != nil {
		return nil, err
	}
	spec.MinVersion, spec.MaxVersion, spec.CipherSuites = params.MinVersion, params.MaxVersion, params.CipherSuites
	for _, sds := range ctc.GetTlsCertificateSdsSecretConfigs() {
		if sds.GetSdsConfig() == nil {
			return nil, fmt.Errorf("secret %q: static secrets are not supported (sds_config must be ads)", sds.GetName())
		}
		if err := xdsconv.CheckADSConfigSource(sds.GetSdsConfig()); err != nil {
			return nil, fmt.Errorf("secret %q: sds_config: %w", sds.GetName(), err)
		}
		spec.SecretNames = append(spec.SecretNames, sds.GetName())
	}
	for i, c := range ctc.GetTlsCertificates() {
		cert, err := listener.ConvertTLSCertificate(c)
		if err != nil {
			return nil, fmt.Errorf("tls_certificates #%d: %w", i, err)
		}
		spec.InlineCerts = append(spec.InlineCerts, cert)
	}
	if len(spec.SecretNames) == 0 && len(spec.InlineCerts) == 0 {
		return nil, errors.New("no certificate (tls_certificate_sds_secret_configs or tls_certificates)")
	}
	return spec, nil
}
