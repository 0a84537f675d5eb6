package xdsconv

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// TLSTransportSocketName is the transport socket of TLS, downstream and upstream.
const TLSTransportSocketName = "envoy.transport_sockets.tls"

// TCPSocketAddress returns the host:port of a TCP socket address; named
// ports, resolvers and other protocols are refused.
func TCPSocketAddress(a *corev3.Address) (string, error) {
	sa := a.GetSocketAddress()
	if sa == nil {
		return "", fmt.Errorf("%T is not supported (only socket_address)", a.GetAddress())
	}
	if sa.GetProtocol() != corev3.SocketAddress_TCP {
		return "", fmt.Errorf("protocol %v is not supported", sa.GetProtocol())
	}
	if sa.GetResolverName() != "" {
		return "", errors.New("resolver_name is not supported")
	}
	if _, ok := sa.GetPortSpecifier().(*corev3.SocketAddress_PortValue); !ok {
		return "", errors.New("named_port is not supported")
	}
	return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10)), nil
}

// CheckADSConfigSource accepts only {ads: {}}: the proxy has no other way to
// fetch resources.
func CheckADSConfigSource(cs *corev3.ConfigSource) error {
	if cs.GetAds() == nil {
		return fmt.Errorf("config source %T is not supported (only ads)", cs.GetConfigSourceSpecifier())
	}
	if v := cs.GetResourceApiVersion(); v != corev3.ApiVersion_V3 && v != corev3.ApiVersion_AUTO {
		return fmt.Errorf("resource_api_version %v is not supported", v)
	}
	return nil
}

// TLSParameters are tls_params as crypto/tls takes them.
type TLSParameters struct {
	MinVersion, MaxVersion uint16
	// CipherSuites are the TLS 1.2 suites allowed (cipher_suites); nil: Go's
	// defaults. TLS 1.3 suites are not configurable.
	CipherSuites []uint16
}

// TLSParams applies tls_params; the default maximum differs between
// servers (TLS 1.3) and clients (TLS 1.2) in Envoy, the minimum is TLS 1.2.
func TLSParams(p *tlsv3.TlsParameters, defaultMax uint16) (TLSParameters, error) {
	if err := Unsupported(
		Set("tls_params.ecdh_curves", len(p.GetEcdhCurves()) > 0),
		Set("tls_params.signature_algorithms", len(p.GetSignatureAlgorithms()) > 0),
		Set("tls_params.compliance_policies", len(p.GetCompliancePolicies()) > 0),
	); err != nil {
		return TLSParameters{}, err
	}
	out := TLSParameters{MinVersion: tls.VersionTLS12, MaxVersion: defaultMax}
	if v := p.GetTlsMinimumProtocolVersion(); v != tlsv3.TlsParameters_TLS_AUTO {
		out.MinVersion = tlsVersion(v)
	}
	if v := p.GetTlsMaximumProtocolVersion(); v != tlsv3.TlsParameters_TLS_AUTO {
		out.MaxVersion = tlsVersion(v)
	}
	if out.MinVersion == 0 || out.MaxVersion == 0 {
		return TLSParameters{}, fmt.Errorf("unknown TLS protocol version in tls_params")
	}
	if out.MinVersion > out.MaxVersion {
		return TLSParameters{}, errors.New("tls_params: minimum protocol version is above the maximum")
	}
	var err error
	if out.CipherSuites, err = CipherSuites(p.GetCipherSuites()); err != nil {
		return TLSParameters{}, fmt.Errorf("tls_params.cipher_suites: %w", err)
	}
	return out, nil
}

func tlsVersion(v tlsv3.TlsParameters_TlsProtocol) uint16 {
	switch v {
	case tlsv3.TlsParameters_TLSv1_0:
		return tls.VersionTLS10
	case tlsv3.TlsParameters_TLSv1_1:
		return tls.VersionTLS11
	case tlsv3.TlsParameters_TLSv1_2:
		return tls.VersionTLS12
	case tlsv3.TlsParameters_TLSv1_3:
		return tls.VersionTLS13
	}
	return 0
}
