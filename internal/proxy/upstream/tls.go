package upstream

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Upstream TLS: a cluster's transport_socket envoy.transport_sockets.tls with
// an UpstreamTlsContext. As in Envoy, the connection is encrypted but the
// server's certificate is not verified unless a validation_context gives a
// trusted_ca; then the chain must verify against it and, when
// match_typed_subject_alt_names is set, one matcher must match a SAN of its
// type (DNS or URI). The server name is never compared with the certificate
// otherwise (Envoy's behaviour).

// defaultMaxSessionKeys is Envoy's UpstreamTlsContext.max_session_keys default.
const defaultMaxSessionKeys = 1

// upstreamTLSSpec is a validated UpstreamTlsContext.
type upstreamTLSSpec struct {
	SNI  string
	alpn []string
	// Roots verify the server's chain; nil: the certificate is not verified.
	Roots *x509.CertPool
	// SANs are the exact SAN matchers; none: any verified certificate.
	SANs       []sanMatcher
	MinVersion uint16
	MaxVersion uint16
	// ClientSecret names the SDS secret of the client certificate presented to the
	// upstream; "": none. The proxy links it (WithClientCertificate).
	ClientSecret string
	// sessionKeys is max_session_keys: the size of the session cache.
	sessionKeys int
	// config is the client configuration of every connection (ServerName, ALPN,
	// verification, session cache), built once.
	config *tls.Config
	// key identifies the settings, so that a transport survives a
	// configuration update that leaves them unchanged.
	key string
}

func convertUpstreamTLS(ts *corev3.TransportSocket) (*upstreamTLSSpec, error) {
	tc := ts.GetTypedConfig()
	if tc == nil || !tc.MessageIs(&tlsv3.UpstreamTlsContext{}) {
		return nil, fmt.Errorf("transport socket %q is not supported (only %s with an UpstreamTlsContext)", ts.GetName(), xdsconv.TLSTransportSocketName)
	}
	var utc tlsv3.UpstreamTlsContext
	if err := anypb.UnmarshalTo(tc, &utc, proto.UnmarshalOptions{}); err != nil {
		return nil, fmt.Errorf("decode UpstreamTlsContext: %w", err)
	}
	// enforce_rsa_key_usage is deprecated and ignored by Envoy.
	if err := xdsconv.Unsupported(
		xdsconv.Set("auto_host_sni", utc.GetAutoHostSni()),
		xdsconv.Set("auto_sni_san_validation", utc.GetAutoSniSanValidation()),
		xdsconv.Set("allow_renegotiation", utc.GetAllowRenegotiation()),
	); err != nil {
		return nil, err
	}
	ctc := utc.GetCommonTlsContext()
	if err := xdsconv.Unsupported(
		xdsconv.Set("tls_certificates (inline client certificates; use tls_certificate_sds_secret_configs)", len(ctc.GetTlsCertificates()) > 0),
		xdsconv.Set("tls_certificate_provider_instance", ctc.GetTlsCertificateProviderInstance() != nil),
		xdsconv.Set("custom_tls_certificate_selector", ctc.GetCustomTlsCertificateSelector() != nil),
		xdsconv.Set("tls_certificate_certificate_provider", ctc.GetTlsCertificateCertificateProvider() != nil),
		xdsconv.Set("tls_certificate_certificate_provider_instance", ctc.GetTlsCertificateCertificateProviderInstance() != nil),
		xdsconv.Set("validation_context_sds_secret_config", ctc.GetValidationContextSdsSecretConfig() != nil),
		xdsconv.Set("combined_validation_context", ctc.GetCombinedValidationContext() != nil),
		xdsconv.Set("validation_context_certificate_provider", ctc.GetValidationContextCertificateProvider() != nil),
		xdsconv.Set("validation_context_certificate_provider_instance", ctc.GetValidationContextCertificateProviderInstance() != nil),
		xdsconv.Set("custom_handshaker", ctc.GetCustomHandshaker() != nil),
		xdsconv.Set("key_log", ctc.GetKeyLog() != nil),
	); err != nil {
		return nil, err
	}
	spec := &upstreamTLSSpec{SNI: utc.GetSni()}
	if err := spec.setClientSecret(ctc.GetTlsCertificateSdsSecretConfigs()); err != nil {
		return nil, err
	}
	for _, p := range ctc.GetAlpnProtocols() {
		if p != "h2" && p != "http/1.1" {
			return nil, fmt.Errorf("ALPN protocol %q is not supported", p)
		}
	}
	spec.alpn = slices.Clone(ctc.GetAlpnProtocols())
	params, err := xdsconv.TLSParams(ctc.GetTlsParams(), tls.VersionTLS12)
	if err != nil {
		return nil, err
	}
	spec.MinVersion, spec.MaxVersion = params.MinVersion, params.MaxVersion
	var caPEM []byte
	if vc := ctc.GetValidationContext(); vc != nil {
		if caPEM, err = spec.setValidation(vc); err != nil {
			return nil, fmt.Errorf("validation_context: %w", err)
		}
	}
	sessionKeys := defaultMaxSessionKeys
	if n := utc.GetMaxSessionKeys(); n != nil {
		sessionKeys = int(n.GetValue())
	}
	spec.config = &tls.Config{
		ServerName: spec.SNI,
		NextProtos: spec.alpn,
		MinVersion: spec.MinVersion,
		MaxVersion: spec.MaxVersion,
		// Go ignores the order: the list says which suites are allowed.
		CipherSuites: params.CipherSuites,
		// Verification is Envoy's, not Go's (which would also check the server
		// name): see verify.
		InsecureSkipVerify: true,
		VerifyConnection:   spec.verify,
	}
	spec.sessionKeys = sessionKeys
	if sessionKeys > 0 {
		spec.config.ClientSessionCache = tls.NewLRUClientSessionCache(sessionKeys)
	}
	sum := sha256.Sum256(caPEM)
	spec.key = fmt.Sprintf("sni=%q alpn=%q ca=%s sans=%q v=%d-%d ciphers=%x keys=%d client=%q",
		spec.SNI, spec.alpn, hex.EncodeToString(sum[:]), spec.SANs, spec.MinVersion, spec.MaxVersion, params.CipherSuites, sessionKeys, spec.ClientSecret)
	return spec, nil
}

// setClientSecret takes the SDS secret of the client certificate presented to the
// upstream: one at most, as Envoy's client contexts take one.
func (s *upstreamTLSSpec) setClientSecret(sds []*tlsv3.SdsSecretConfig) error {
	if len(sds) > 1 {
		return fmt.Errorf("tls_certificate_sds_secret_configs: %d client certificates, an upstream context takes one", len(sds))
	}
	for _, c := range sds {
		if c.GetSdsConfig() == nil {
			return fmt.Errorf("secret %q: static secrets are not supported (sds_config must be ads)", c.GetName())
		}
		if err := xdsconv.CheckADSConfigSource(c.GetSdsConfig()); err != nil {
			return fmt.Errorf("secret %q: sds_config: %w", c.GetName(), err)
		}
		s.ClientSecret = c.GetName()
	}
	return nil
}

// WithClientCertificate is s presenting cert to upstreams that ask for a client
// certificate (the SDS secret ClientSecret names): a copy, s is shared.
func (s *upstreamTLSSpec) WithClientCertificate(cert *tls.Certificate) *upstreamTLSSpec {
	c := *s
	c.config = s.config.Clone()
	c.config.Certificates = []tls.Certificate{*cert}
	if s.sessionKeys > 0 {
		// Sessions of another certificate are not resumed: a resumed session skips
		// the certificate, so a renewed (or revoked) one would never be presented.
		// Envoy likewise starts a new TLS context, and session cache, per secret.
		c.config.ClientSessionCache = tls.NewLRUClientSessionCache(s.sessionKeys)
	}
	return &c
}

// setValidation honours trusted_ca and match_typed_subject_alt_names (DNS or
// URI, exact), and returns the CA's PEM.
func (s *upstreamTLSSpec) setValidation(vc *tlsv3.CertificateValidationContext) ([]byte, error) {
	if err := xdsconv.Unsupported(
		xdsconv.Set("ca_certificate_provider_instance", vc.GetCaCertificateProviderInstance() != nil),
		xdsconv.Set("system_root_certs", vc.GetSystemRootCerts() != nil),
		xdsconv.Set("watched_directory", vc.GetWatchedDirectory() != nil),
		xdsconv.Set("verify_certificate_spki", len(vc.GetVerifyCertificateSpki()) > 0),
		xdsconv.Set("verify_certificate_hash", len(vc.GetVerifyCertificateHash()) > 0),
		xdsconv.Set("match_subject_alt_names (deprecated; use match_typed_subject_alt_names)", len(vc.GetMatchSubjectAltNames()) > 0),
		xdsconv.Set("require_signed_certificate_timestamp", vc.GetRequireSignedCertificateTimestamp().GetValue()),
		xdsconv.Set("crl", vc.GetCrl() != nil),
		xdsconv.Set("allow_expired_certificate", vc.GetAllowExpiredCertificate()),
		xdsconv.Set("trust_chain_verification "+vc.GetTrustChainVerification().String(),
			vc.GetTrustChainVerification() != tlsv3.CertificateValidationContext_VERIFY_TRUST_CHAIN),
		xdsconv.Set("custom_validator_config", vc.GetCustomValidatorConfig() != nil),
		xdsconv.Set("only_verify_leaf_cert_crl", vc.GetOnlyVerifyLeafCertCrl()),
		xdsconv.Set("max_verify_depth", vc.GetMaxVerifyDepth() != nil),
	); err != nil {
		return nil, err
	}
	var caPEM []byte
	if ca := vc.GetTrustedCa(); ca != nil {
		var err error
		if caPEM, err = xdsconv.InlineData(ca); err != nil {
			return nil, fmt.Errorf("trusted_ca: %w", err)
		}
		s.Roots = x509.NewCertPool()
		if !s.Roots.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("trusted_ca: no PEM certificate")
		}
	}
	for i, m := range vc.GetMatchTypedSubjectAltNames() {
		san, err := convertSANMatcher(m)
		if err != nil {
			return nil, fmt.Errorf("match_typed_subject_alt_names #%d: %w", i, err)
		}
		s.SANs = append(s.SANs, san)
	}
	if len(s.SANs) > 0 && s.Roots == nil {
		// Envoy refuses SAN matching without a trust anchor, which would be
		// no verification at all.
		return nil, errors.New("match_typed_subject_alt_names needs trusted_ca")
	}
	return caPEM, nil
}

// verify is Envoy's verification of an upstream's certificate: the chain
// against trusted_ca, then the SAN matchers. Without trusted_ca anything goes.
func (s *upstreamTLSSpec) verify(cs tls.ConnectionState) error {
	if s.Roots == nil {
		return nil
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the upstream sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	opts := x509.VerifyOptions{
		Roots:         s.Roots,
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("certificate verify failed: %w", err)
	}
	if len(s.SANs) == 0 || matchSANs(leaf, s.SANs) {
		return nil
	}
	return fmt.Errorf("certificate verify failed: no SAN of the certificate (DNS %q, URI %q) matches %v", leaf.DNSNames, uriSANs(leaf), s.SANs)
}

// sanMatcher is one entry of match_typed_subject_alt_names: an exact value
// for SANs of one type.
type sanMatcher struct {
	uri   bool // a URI SAN; otherwise a DNS SAN
	value string
	// ignoreCase compares URIs without case (DNS names always are).
	ignoreCase bool
}

// String names the matcher in errors and in the spec's key.
func (m sanMatcher) String() string {
	switch {
	case !m.uri:
		return "DNS:" + m.value
	case m.ignoreCase:
		return "URI:" + m.value + " (any case)"
	}
	return "URI:" + m.value
}

func convertSANMatcher(m *tlsv3.SubjectAltNameMatcher) (sanMatcher, error) {
	var out sanMatcher
	switch m.GetSanType() {
	case tlsv3.SubjectAltNameMatcher_DNS:
	case tlsv3.SubjectAltNameMatcher_URI:
		out.uri = true
	default:
		return out, fmt.Errorf("san_type %v is not supported (only DNS and URI)", m.GetSanType())
	}
	exact, ok := m.GetMatcher().GetMatchPattern().(*matcherv3.StringMatcher_Exact)
	if !ok || exact.Exact == "" {
		return out, errors.New("only a non-empty exact matcher is supported")
	}
	out.value, out.ignoreCase = exact.Exact, m.GetMatcher().GetIgnoreCase()
	if !out.uri {
		// Envoy matches DNS names case-insensitively whatever ignore_case says.
		out.value = strings.ToLower(out.value)
	}
	return out, nil
}

// matchSANs reports whether any matcher matches a SAN of its type in leaf,
// Envoy's rule for match_typed_subject_alt_names.
func matchSANs(leaf *x509.Certificate, matchers []sanMatcher) bool {
	var uris []string // read from the certificate once, when a URI matcher needs them
	urisRead := false
	for _, m := range matchers {
		if !m.uri {
			if slices.ContainsFunc(leaf.DNSNames, func(san string) bool { return dnsNameMatch(m.value, san) }) {
				return true
			}
			continue
		}
		if !urisRead {
			uris, urisRead = uriSANs(leaf), true
		}
		if slices.ContainsFunc(uris, func(san string) bool { return san == m.value || m.ignoreCase && strings.EqualFold(san, m.value) }) {
			return true
		}
	}
	return false
}

// oidSubjectAltName is the subjectAltName extension (RFC 5280, 4.2.1.6).
var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

// uriSANs are the URI SANs of cert as written in it. Go's leaf.URIs are parsed
// URLs whose string form may differ (a scheme is lowercased, say), and Envoy
// compares the text itself.
func uriSANs(cert *x509.Certificate) []string {
	const uniformResourceIdentifier = 6 // GeneralName's [6] IA5String
	var out []string
	for _, ext := range cert.Extensions {
		if !ext.Id.Equal(oidSubjectAltName) {
			continue
		}
		var names asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &names); err != nil || len(rest) > 0 {
			return nil // x509.ParseCertificate refuses such a certificate
		}
		for in := names.Bytes; len(in) > 0; {
			var name asn1.RawValue
			var err error
			if in, err = asn1.Unmarshal(in, &name); err != nil {
				return out
			}
			if name.Class == asn1.ClassContextSpecific && name.Tag == uniformResourceIdentifier {
				out = append(out, string(name.Bytes))
			}
		}
	}
	return out
}

// dnsNameMatch is Envoy's DNS SAN comparison for an exact matcher: equal
// case-insensitively, or a "*.suffix" SAN covering exactly one more label.
func dnsNameMatch(name, san string) bool {
	name, san = strings.ToLower(name), strings.ToLower(san)
	if name == san {
		return true
	}
	if len(san) > 2 && strings.HasPrefix(san, "*.") && len(name) > len(san)-1 {
		label, rest := name[:len(name)-len(san)+1], name[len(name)-len(san)+1:]
		return !strings.Contains(label, ".") && rest == san[1:]
	}
	return false
}

// tlsHandshakeError is a failed TLS handshake with an upstream: a connect
// failure, as in Envoy.
type TLSHandshakeError struct{ err error }

func (e *TLSHandshakeError) Error() string { return "TLS error: " + e.err.Error() }
func (e *TLSHandshakeError) Unwrap() error { return e.err }

// DialTLS connects to addr and completes the TLS handshake of the cluster's
// transport socket; connect_timeout bounds both, as Envoy's connect timer
// only stops once the handshake is done. A handshake failure is reported as a
// dial error (a connect failure for retries, outlier detection and metrics).
func DialTLS(ctx context.Context, d EndpointDialer, addr string, spec *upstreamTLSSpec, requireH2 bool) (net.Conn, error) {
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	conn, err := d.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(conn, spec.config)
	fail := func(err error) (net.Conn, error) {
		_ = conn.Close()
		return nil, &net.OpError{Op: "dial", Net: d.Network, Addr: conn.RemoteAddr(), Err: &TLSHandshakeError{err}}
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return fail(err)
	}
	if requireH2 && tc.ConnectionState().NegotiatedProtocol != "h2" {
		// Envoy would speak HTTP/2 anyway and fail; net/http would fall back
		// to HTTP/1.1, which the cluster does not allow.
		return fail(errors.New("the upstream did not negotiate h2 by ALPN"))
	}
	return tc, nil
}
