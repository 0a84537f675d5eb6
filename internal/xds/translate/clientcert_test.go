package translate

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/dag"
)

// A host that checks client certificates asks for one (unless optional), trusts its CA
// and revocation lists, and forwards the parts asked for in x-forwarded-client-cert; a
// host that does not keeps Envoy's defaults (no certificate asked, the header removed).
func TestClientValidationTranslates(t *testing.T) {
	web := testCluster("team", "web", 80)
	secret := &dag.Secret{Name: "team/cert", Cert: []byte("c"), Key: []byte("k")}
	host := func(name string, cv *dag.ClientValidation) *dag.SecureVirtualHost {
		return &dag.SecureVirtualHost{VirtualHost: dag.VirtualHost{Name: name, Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}, Secret: secret, ClientValidation: cv}
	}
	g := &dag.Graph{HTTPS: []*dag.SecureVirtualHost{
		host("mtls.example.com", &dag.ClientValidation{CAName: "team/ca", CACert: []byte("ca"), CRL: []byte("crl"), OnlyLeafCRL: true,
			Forward: &dag.ForwardClientCert{Subject: true, Cert: true, URI: true}}),
		host("optional.example.com", &dag.ClientValidation{CACert: []byte("ca"), Optional: true}),
		host("skip.example.com", &dag.ClientValidation{SkipVerify: true}),
		host("plain.example.com", nil),
	}}
	res, err := Translate(g, Options{HTTPSAddress: "127.0.0.1:8443"})
	if err != nil {
		t.Fatal(err)
	}
	checkMarshal(t, res)
	chains := map[string]*listenerv3.FilterChain{}
	for _, r := range res.Listeners {
		l := r.(*listenerv3.Listener)
		if err := l.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		for _, fc := range l.FilterChains {
			chains[fc.Name] = fc
		}
	}
	tlsOf := func(name string) *tlsv3.DownstreamTlsContext {
		var d tlsv3.DownstreamTlsContext
		if err := chains[name].GetTransportSocket().GetTypedConfig().UnmarshalTo(&d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return &d
	}
	validation := func(name string) *tlsv3.CertificateValidationContext {
		return tlsOf(name).GetCommonTlsContext().GetValidationContext()
	}

	mtls := validation("mtls.example.com")
	if string(mtls.GetTrustedCa().GetInlineBytes()) != "ca" || string(mtls.GetCrl().GetInlineBytes()) != "crl" || !mtls.GetOnlyVerifyLeafCertCrl() ||
		mtls.GetTrustChainVerification() != tlsv3.CertificateValidationContext_VERIFY_TRUST_CHAIN {
		t.Errorf("mtls validation context = %v", mtls)
	}
	if !tlsOf("mtls.example.com").GetRequireClientCertificate().GetValue() {
		t.Error("mtls.example.com does not require a client certificate")
	}
	hcm := decodeHCM(t, chains["mtls.example.com"])
	wantDetails := &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Subject: wrapperspb.Bool(true), Cert: true, Uri: true}
	if hcm.ForwardClientCertDetails != hcmv3.HttpConnectionManager_SANITIZE_SET || !cmp.Equal(hcm.SetCurrentClientCertDetails, wantDetails, protocmp.Transform()) {
		t.Errorf("mtls forwards %v %v, want SANITIZE_SET %v", hcm.ForwardClientCertDetails, hcm.SetCurrentClientCertDetails, wantDetails)
	}

	if tlsOf("optional.example.com").GetRequireClientCertificate().GetValue() || string(validation("optional.example.com").GetTrustedCa().GetInlineBytes()) != "ca" {
		t.Errorf("optional.example.com: %v", tlsOf("optional.example.com"))
	}
	if v := validation("skip.example.com"); v.GetTrustChainVerification() != tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED || v.GetTrustedCa() != nil {
		t.Errorf("skip.example.com validation = %v", v)
	}
	if d := tlsOf("plain.example.com"); d.GetRequireClientCertificate() != nil || d.GetCommonTlsContext().GetValidationContextType() != nil {
		t.Errorf("a host without clientValidation asks for a certificate: %v", d)
	}
	if h := decodeHCM(t, chains["plain.example.com"]); h.ForwardClientCertDetails != hcmv3.HttpConnectionManager_SANITIZE || h.SetCurrentClientCertDetails != nil {
		t.Errorf("a host without clientValidation forwards client certificates: %v", h.ForwardClientCertDetails)
	}
}
