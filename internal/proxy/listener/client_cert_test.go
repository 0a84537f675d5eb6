package listener

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/testutil"
)

// The client certificate settings the proxy cannot honour are NACKed, naming the field,
// never half-applied: a host would let in clients it should refuse.
func TestConvertClientValidationRejects(t *testing.T) {
	ca := testutil.SelfSigned("ca")
	inline := func(b []byte) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
	}
	ctx := func(require bool, vc *tlsv3.CertificateValidationContext) *tlsv3.DownstreamTlsContext {
		d := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}}
		if require {
			d.RequireClientCertificate = wrapperspb.Bool(true)
		}
		if vc != nil {
			d.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
		}
		return d
	}
	for name, tc := range map[string]struct {
		d    *tlsv3.DownstreamTlsContext
		want string
	}{
		"required without validation": {ctx(true, nil), "needs a validation_context"},
		"no CA":                       {ctx(true, &tlsv3.CertificateValidationContext{}), "trusted_ca is required"},
		"CA not PEM":                  {ctx(true, &tlsv3.CertificateValidationContext{TrustedCa: inline([]byte("x"))}), "holds no PEM certificate"},
		"CA from a file":              {ctx(true, &tlsv3.CertificateValidationContext{TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: "/ca"}}}), "only inline_bytes"},
		"CRL not PEM":                 {ctx(true, &tlsv3.CertificateValidationContext{TrustedCa: inline(ca.CertPEM), Crl: inline(ca.CertPEM)}), "no PEM X509 CRL"},
		"SPKI pins":                   {ctx(true, &tlsv3.CertificateValidationContext{TrustedCa: inline(ca.CertPEM), VerifyCertificateSpki: []string{"x"}}), "verify_certificate_spki"},
		"SDS validation":              {&tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{}}}, "only an inline validation_context"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ConvertClientValidation(tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	cv, err := ConvertClientValidation(ctx(false, &tlsv3.CertificateValidationContext{TrustChainVerification: tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED}))
	if err != nil || cv == nil || cv.require || !cv.acceptUntrusted || cv.roots != nil {
		t.Fatalf("ACCEPT_UNTRUSTED without a CA: %+v, %v", cv, err)
	}
}
