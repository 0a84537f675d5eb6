package dag

import (
	"encoding/pem"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

func opaqueSecret(namespace, name, key string, data []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: map[string][]byte{key: data}}
}

func clientValidationOf(g *Graph, host string) *ClientValidation {
	for _, svh := range g.HTTPS {
		if svh.Name == host {
			return svh.ClientValidation
		}
	}
	return nil
}

// spec.virtualhost.tls.clientValidation: a valid one reaches the host's TLS settings with
// the CA and CRL of its Secrets; a mistake makes the root invalid, with a message saying
// what to fix, and its host is not served at all (its clients must never get in
// unchecked).
func TestHTTPProxyClientValidation(t *testing.T) {
	cert := testutil.SelfSigned("m.example.com")
	ca := testutil.SelfSigned("clients-ca")
	crl := pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: []byte("not parsed by the builder")})
	objs := func(cv string, more ...*corev1.Secret) []*corev1.Secret {
		return append([]*corev1.Secret{
			tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM),
			opaqueSecret("default", "ca", "ca.crt", ca.CertPEM),
			opaqueSecret("default", "crl", "crl.pem", crl),
		}, more...)
	}
	buildCV := func(cv string, secrets []*corev1.Secret) *Graph {
		p := proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: m.example.com, tls: {secretName: cert, clientValidation: `+cv+`}}
  routes: [{services: [{name: web, port: 80}]}]
`)
		var o []runtime.Object
		o = append(o, p, svc("default", "web", "http:80"))
		for _, s := range secrets {
			o = append(o, s)
		}
		return build(o...)
	}

	g := buildCV(`{caSecret: ca, crlSecret: crl, crlOnlyVerifyLeafCert: true, optionalClientCertificate: true, forwardClientCertificate: {subject: true, dns: true}}`, objs(""))
	wantClean(t, g, "default", "root")
	got := clientValidationOf(g, "m.example.com")
	if got == nil || got.CAName != "default/ca" || string(got.CACert) != string(ca.CertPEM) || string(got.CRL) != string(crl) ||
		!got.OnlyLeafCRL || !got.Optional || got.SkipVerify || got.Forward == nil || !got.Forward.Subject || !got.Forward.DNS || got.Forward.Cert {
		t.Fatalf("client validation = %+v", got)
	}
	if g := buildCV(`{skipClientCertValidation: true}`, objs("")); clientValidationOf(g, "m.example.com") == nil {
		t.Error("skipClientCertValidation without caSecret is valid, and still asks for a certificate")
	}

	for _, tc := range []struct {
		name, cv, typ, reason string
		parts                 []string
	}{
		{"no CA", `{optionalClientCertificate: true}`, problemTLS, "ClientValidationInvalid", []string{"caSecret is required", "skipClientCertValidation"}},
		{"CRL without verification", `{skipClientCertValidation: true, crlSecret: crl}`, problemTLS, "ClientValidationInvalid", []string{"crlSecret cannot be used with skipClientCertValidation"}},
		{"leaf-only without CRL", `{caSecret: ca, crlOnlyVerifyLeafCert: true}`, problemTLS, "ClientValidationInvalid", []string{"crlOnlyVerifyLeafCert needs crlSecret"}},
		{"missing CA Secret", `{caSecret: nope}`, problemTLS, "CASecretInvalid", []string{"Secret default/nope not found"}},
		{"CA Secret without ca.crt", `{caSecret: cert}`, problemTLS, "CASecretInvalid", []string{`has no "ca.crt"`}},
		{"CRL Secret without crl.pem", `{caSecret: ca, crlSecret: ca}`, problemTLS, "CRLSecretInvalid", []string{`has no "crl.pem"`}},
		{"CA of a namespace that does not delegate it", `{caSecret: other/ca}`, problemTLS, "DelegationNotPermitted", []string{"namespace other does not delegate Secret ca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := buildCV(tc.cv, objs("", opaqueSecret("other", "ca", "ca.crt", ca.CertPEM)))
			wantInvalid(t, g, "default", "root", tc.typ, tc.reason, tc.parts...)
			if http, https := hostNames(g); slices.Contains(https, "m.example.com") || slices.Contains(http, "m.example.com") {
				t.Errorf("m.example.com is served without its client validation: %v %v", http, https)
			}
		})
	}
}

// tls.enableFallbackCertificate: the root's routes are served, by Host, to clients of
// the fallback certificate (the secure host "*"); without a configured certificate, or
// with clientValidation, the root is invalid rather than served without it.
func TestHTTPProxyFallbackCertificate(t *testing.T) {
	cert := testutil.SelfSigned("f.example.com")
	fb := testutil.SelfSigned("fallback.example.com")
	objs := func(tlsExtra string) []runtime.Object {
		return []runtime.Object{proxy(t, `
metadata: {name: root}
spec:
  virtualhost: {fqdn: f.example.com, tls: {secretName: cert, enableFallbackCertificate: true`+tlsExtra+`}}
  routes: [{services: [{name: web, port: 80}]}]
`), svc("default", "web", "http:80"), tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM), tlsSecret("infra", "fallback", fb.CertPEM, fb.KeyPEM),
			opaqueSecret("default", "ca", "ca.crt", cert.CertPEM)}
	}
	key := &types.NamespacedName{Namespace: "infra", Name: "fallback"}
	g := Build(store.FromObjects(objs("")), Options{FallbackCertificate: key})
	wantClean(t, g, "default", "root")
	var fallback *SecureVirtualHost
	for _, svh := range g.HTTPS {
		if svh.Name == "*" {
			fallback = svh
		}
	}
	if fallback == nil || fallback.Secret.Name != "infra/fallback" || len(fallback.Also) != 1 || fallback.Also[0].Name != "f.example.com" || len(fallback.Also[0].Routes) == 0 {
		t.Fatalf("fallback host = %+v", fallback)
	}
	wantInvalid(t, Build(store.FromObjects(objs("")), Options{}), "default", "root", problemTLS, "FallbackNotPresent", "--fallback-certificate")
	wantInvalid(t, Build(store.FromObjects(objs("")), Options{FallbackCertificate: &types.NamespacedName{Namespace: "infra", Name: "nope"}}),
		"default", "root", problemTLS, "FallbackNotValid", "infra/nope")
	wantInvalid(t, Build(store.FromObjects(objs(", clientValidation: {caSecret: ca}")), Options{FallbackCertificate: key}),
		"default", "root", problemTLS, "FallbackInvalid", "cannot be used with clientValidation")
}
