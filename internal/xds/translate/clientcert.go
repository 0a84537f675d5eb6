package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// clientValidation asks clients of a TLS host for a certificate and says how to
// check it. The CAs and revocation lists are inline: they change with their
// Secret, as the listener does anyway when the host's TLS settings change.
func clientValidation(ctx *tlsv3.DownstreamTlsContext, cv *dag.ClientValidation) {
	if cv == nil {
		return
	}
	vc := &tlsv3.CertificateValidationContext{}
	if len(cv.CACert) > 0 {
		vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: cv.CACert}}
	}
	if cv.SkipVerify {
		vc.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
	}
	if len(cv.CRL) > 0 {
		vc.Crl = &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: cv.CRL}}
		vc.OnlyVerifyLeafCertCrl = cv.OnlyLeafCRL
	}
	ctx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
	ctx.RequireClientCertificate = wrapperspb.Bool(!cv.Optional)
}

// forwardClientCert has the connection manager of a host that checks client
// certificates pass the parts asked for upstream in x-forwarded-client-cert,
// replacing whatever the client sent (which is always removed).
func forwardClientCert(hcm *hcmv3.HttpConnectionManager, cv *dag.ClientValidation) {
	if cv == nil || cv.Forward == nil {
		return
	}
	f := cv.Forward
	hcm.ForwardClientCertDetails = hcmv3.HttpConnectionManager_SANITIZE_SET
	hcm.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{
		Subject: wrapperspb.Bool(f.Subject),
		Cert:    f.Cert,
		Chain:   f.Chain,
		Dns:     f.DNS,
		Uri:     f.URI,
	}
}
