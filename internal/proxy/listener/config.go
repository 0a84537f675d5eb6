package listener

import (
	"crypto/tls"
	"time"

	"github.com/portico-dev/portico/internal/proxy/hcm"
)

// Config is a listener of a compiled configuration (package proxy's snapshot).
type Config struct {
	Name    string
	Address string // the Listener's own socket address
	Tls     bool
	// Chains is keyed by server-name pattern ("a.example.com", "*.example.com");
	// "" is the default chain, and the only chain of a plaintext listener.
	Chains map[string]*FilterChain
	// hcmListener is what its chains' connection manager reads: the
	// snapshot's clusters, the certificates its TLS chains present.
	hcm.Listener
	// HasTCP: some chain is a tcp_proxy, so connections are dispatched on
	// their ClientHello's SNI before anything else (see tlsListener).
	HasTCP            bool
	FiltersTimeout    time.Duration
	ContinueOnTimeout bool
	// ProxyProtocol: every connection starts with a PROXY protocol header
	// (envoy.filters.listener.proxy_protocol); nil: none is read.
	ProxyProtocol *ProxyProtocolSpec
}

// FilterChain is an HTTP chain (hcm, routes, stats) or a tcp_proxy one (tcp);
// tlsConfig terminates TLS, nil for a passthrough or plaintext chain.
type FilterChain struct {
	hcm.Chain // hcm nil for a tcp_proxy chain
	Tcp       *TcpProxySpec
	TlsConfig *tls.Config
}

// TlsSpec is a validated DownstreamTlsContext.
type TlsSpec struct {
	SecretNames []string          // SDS secrets (served over ADS)
	InlineCerts []tls.Certificate // tls_certificates
	Alpn        []string
	MinVersion  uint16
	MaxVersion  uint16
	// CipherSuites are the TLS 1.2 suites clients may use (tls_params.cipher_suites);
	// nil: Go's defaults.
	CipherSuites []uint16
	// Clients is how client certificates are asked for and checked; nil:
	// they are not.
	Clients *clientValidation
}
