package listener

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/portico-dev/portico/internal/proxy/internal/xdsconv"
)

// clientValidation is how a TLS filter chain asks for and checks client
// certificates (DownstreamTlsContext.require_client_certificate and the
// common context's validation_context), as Envoy does.
type clientValidation struct {
	require bool
	// roots are the trusted CAs; nil with acceptUntrusted: any certificate
	// is taken without verification (trust_chain_verification
	// ACCEPT_UNTRUSTED).
	roots           *x509.CertPool
	acceptUntrusted bool
	// crls, when set, must cover the issuer of every certificate of the
	// verified chain but the root, or of the leaf only (onlyLeafCRL).
	crls        []*x509.RevocationList
	onlyLeafCRL bool
}

// ConvertClientValidation converts the client certificate settings of a
// DownstreamTlsContext; nil when it asks for none.
func ConvertClientValidation(dtc *tlsv3.DownstreamTlsContext) (*clientValidation, error) {
	ctc := dtc.GetCommonTlsContext()
	vt := ctc.GetValidationContextType()
	require := dtc.GetRequireClientCertificate().GetValue()
	if vt == nil {
		if require {
			return nil, errors.New("require_client_certificate needs a validation_context")
		}
		return nil, nil
	}
	vc, ok := vt.(*tlsv3.CommonTlsContext_ValidationContext)
	if !ok {
		return nil, fmt.Errorf("validation context %T is not supported (only an inline validation_context)", vt)
	}
	v := vc.ValidationContext
	if err := xdsconv.Unsupported(
		xdsconv.Set("validation_context.watched_directory", v.GetWatchedDirectory() != nil),
		xdsconv.Set("validation_context.ca_certificate_provider_instance", v.GetCaCertificateProviderInstance() != nil),
		xdsconv.Set("validation_context.verify_certificate_spki", len(v.GetVerifyCertificateSpki()) > 0),
		xdsconv.Set("validation_context.verify_certificate_hash", len(v.GetVerifyCertificateHash()) > 0),
		xdsconv.Set("validation_context.match_typed_subject_alt_names", len(v.GetMatchTypedSubjectAltNames()) > 0),
		xdsconv.Set("validation_context.match_subject_alt_names", len(v.GetMatchSubjectAltNames()) > 0),
		xdsconv.Set("validation_context.require_signed_certificate_timestamp", v.GetRequireSignedCertificateTimestamp().GetValue()),
		xdsconv.Set("validation_context.allow_expired_certificate", v.GetAllowExpiredCertificate()),
		xdsconv.Set("validation_context.custom_validator_config", v.GetCustomValidatorConfig() != nil),
		xdsconv.Set("validation_context.max_verify_depth", v.GetMaxVerifyDepth() != nil),
	); err != nil {
		return nil, err
	}
	cv := &clientValidation{require: require, onlyLeafCRL: v.GetOnlyVerifyLeafCertCrl()}
	switch v.GetTrustChainVerification() {
	case tlsv3.CertificateValidationContext_VERIFY_TRUST_CHAIN:
	case tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED:
		cv.acceptUntrusted = true
	default:
		return nil, fmt.Errorf("validation_context.trust_chain_verification %v is not supported", v.GetTrustChainVerification())
	}
	if ca := v.GetTrustedCa(); ca != nil {
		b, err := inlineBytes(ca, "validation_context.trusted_ca")
		if err != nil {
			return nil, err
		}
		cv.roots = x509.NewCertPool()
		if !cv.roots.AppendCertsFromPEM(b) {
			return nil, errors.New("validation_context.trusted_ca holds no PEM certificate")
		}
	} else if !cv.acceptUntrusted {
		return nil, errors.New("validation_context.trusted_ca is required unless trust_chain_verification is ACCEPT_UNTRUSTED")
	}
	if crl := v.GetCrl(); crl != nil {
		b, err := inlineBytes(crl, "validation_context.crl")
		if err != nil {
			return nil, err
		}
		if cv.crls, err = parseCRLs(b); err != nil {
			return nil, fmt.Errorf("validation_context.crl: %w", err)
		}
	}
	return cv, nil
}

func inlineBytes(ds *corev3.DataSource, name string) ([]byte, error) {
	switch s := ds.GetSpecifier().(type) {
	case *corev3.DataSource_InlineBytes:
		return s.InlineBytes, nil
	case *corev3.DataSource_InlineString:
		return []byte(s.InlineString), nil
	}
	return nil, fmt.Errorf("%s: only inline_bytes or inline_string is supported", name)
}

// parseCRLs reads every X509 CRL of a PEM bundle.
func parseCRLs(b []byte) ([]*x509.RevocationList, error) {
	var out []*x509.RevocationList
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "X509 CRL" {
			continue
		}
		l, err := x509.ParseRevocationList(blk.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM X509 CRL")
	}
	return out, nil
}

// apply asks for client certificates on a chain's TLS configuration, and
// checks them as Envoy does.
func (cv *clientValidation) apply(cfg *tls.Config) {
	if cv == nil {
		return
	}
	switch {
	case cv.acceptUntrusted && cv.require:
		cfg.ClientAuth = tls.RequireAnyClientCert
	case cv.acceptUntrusted:
		cfg.ClientAuth = tls.RequestClientCert
	case cv.require:
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	cfg.ClientCAs = cv.roots
	if len(cv.crls) > 0 && !cv.acceptUntrusted {
		cfg.VerifyPeerCertificate = cv.checkRevocation
	}
}

// checkRevocation runs after Go verified the chain: each certificate issued
// by a CA of the chain (the leaf only with onlyLeafCRL) must be covered by a
// CRL of its issuer and not revoked by it. As with Envoy, a chain whose
// issuer has no CRL is refused: the CRLs must cover every CA.
func (cv *clientValidation) checkRevocation(_ [][]byte, chains [][]*x509.Certificate) error {
	if len(chains) == 0 {
		return nil // no certificate sent, and none required
	}
	chain := chains[0]
	n := len(chain) - 1
	if cv.onlyLeafCRL {
		n = min(n, 1)
	}
	for i := range n {
		cert, issuer := chain[i], chain[i+1]
		crl := cv.crlOf(issuer)
		if crl == nil {
			return fmt.Errorf("no CRL for issuer %q of %q", issuer.Subject, cert.Subject)
		}
		for _, e := range crl.RevokedCertificateEntries {
			if e.SerialNumber.Cmp(cert.SerialNumber) == 0 {
				return fmt.Errorf("certificate %q (serial %s) is revoked", cert.Subject, cert.SerialNumber)
			}
		}
	}
	return nil
}

func (cv *clientValidation) crlOf(issuer *x509.Certificate) *x509.RevocationList {
	for _, l := range cv.crls {
		if bytes.Equal(l.RawIssuer, issuer.RawSubject) && l.CheckSignatureFrom(issuer) == nil {
			return l
		}
	}
	return nil
}

// ServedCertificate is the certificate a TLS listener's chain for sni
// presents, as crypto/tls picks it: the first whose names cover sni, else
// the first. Its URI SANs are the header's By.
func (lc *Config) ServedCertificate(sni string) *tls.Certificate {
	chain, _ := lc.SelectChain(sni)
	if chain == nil || chain.TlsConfig == nil || len(chain.TlsConfig.Certificates) == 0 {
		return nil
	}
	certs := chain.TlsConfig.Certificates
	for i := range certs {
		if l := certs[i].Leaf; l != nil && l.VerifyHostname(sni) == nil {
			return &certs[i]
		}
	}
	return &certs[0]
}
