package dag

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/testutil"
)

// jwtRoot is a root on api.example.com with TLS, the providers vh adds and the
// routes given.
func jwtRoot(t *testing.T, providers, routes string) *Graph {
	t.Helper()
	cert := testutil.SelfSigned("api.example.com")
	ca := testutil.SelfSigned("idp.example.com")
	caSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "idp-ca"}, Data: map[string][]byte{"ca.crt": ca.CertPEM}}
	jwks := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "jwks"}, Data: map[string][]byte{
		"jwks.json": []byte(localKeySet), "bad.json": []byte(`{"keys": 1}`)}}
	return build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: api.example.com
    tls: {secretName: cert}
    jwtProviders:`+providers+`
  routes:`+routes), tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM), caSecret, jwks)
}

const jwtRoutes = `
  - services: [{name: web, port: 80}]`

// Each invalid provider or route policy makes the root invalid with a status
// naming the field and the fix; nothing is served without the verification.
func TestJWTProviderValidation(t *testing.T) {
	for _, tc := range []struct {
		name, providers, routes string
		reason                  string
		parts                   []string
	}{
		{"two defaults", `
    - {name: a, default: true, remoteJWKS: {uri: "https://idp.example.com/keys"}}
    - {name: b, default: true, remoteJWKS: {uri: "https://idp.example.com/keys"}}`, jwtRoutes,
			"MultipleDefaultProvidersSpecified", []string{`spec.virtualhost.jwtProviders[1] ("b") and provider "a" are both default`}},
		{"duplicate names", `
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/keys"}}
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/other"}}`, jwtRoutes,
			"DuplicateProviderName", []string{`spec.virtualhost.jwtProviders[1].name "a" is used by another provider`}},
		{"no key set", `
    - {name: a}`, jwtRoutes, "JWKSSourceMissing", []string{"spec.virtualhost.jwtProviders[0] needs remoteJWKS.uri"}},
		{"bad scheme", `
    - {name: a, remoteJWKS: {uri: "ftp://idp.example.com/keys"}}`, jwtRoutes,
			"RemoteJWKSURIInvalid", []string{`spec.virtualhost.jwtProviders[0].remoteJWKS.uri "ftp://idp.example.com/keys": the scheme must be http or https`}},
		{"not a URL", `
    - {name: a, remoteJWKS: {uri: "https://idp example.com/keys"}}`, jwtRoutes, "RemoteJWKSURIInvalid", []string{"not a URL"}},
		{"loopback", `
    - {name: a, remoteJWKS: {uri: "http://127.0.0.1:8090/metrics"}}`, jwtRoutes, "RemoteJWKSURIInvalid", []string{"127.0.0.1 is this machine"}},
		{"localhost", `
    - {name: a, remoteJWKS: {uri: "http://localhost/keys"}}`, jwtRoutes, "RemoteJWKSURIInvalid", []string{"localhost is this machine"}},
		{"validation over http", `
    - {name: a, remoteJWKS: {uri: "http://idp.example.com/keys", validation: {caSecret: idp-ca, subjectName: idp.example.com}}}`, jwtRoutes,
			"RemoteJWKSUpstreamValidationInvalid", []string{"validation needs an https uri"}},
		{"bad timeout", `
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/keys", timeout: "-1s"}}`, jwtRoutes,
			"RemoteJWKSDurationInvalid", []string{`remoteJWKS.timeout "-1s" must be a positive duration`}},
		{"bad cache duration", `
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/keys", cacheDuration: "soon"}}`, jwtRoutes,
			"RemoteJWKSDurationInvalid", []string{`remoteJWKS.cacheDuration "soon"`}},
		{"bad DNS family", `
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/keys", dnsLookupFamily: v5}}`, jwtRoutes,
			"RemoteJWKSDNSLookupFamilyInvalid", []string{`dnsLookupFamily "v5" must be one of auto, v4, v6, all`}},
		{"missing CA Secret", `
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/keys", validation: {caSecret: nope, subjectName: idp.example.com}}}`, jwtRoutes,
			"RemoteJWKSUpstreamValidationInvalid", []string{"Secret default/nope not found"}},
		{"local key set Secret missing", `
    - {name: a, localJWKS: {secretName: nope, key: jwks.json}}`, jwtRoutes, "LocalJWKSInvalid", []string{"spec.virtualhost.jwtProviders[0].localJWKS: Secret default/nope not found"}},
		{"local key set key missing", `
    - {name: a, localJWKS: {secretName: jwks, key: other.json}}`, jwtRoutes, "LocalJWKSInvalid", []string{`Secret default/jwks has no key "other.json"`}},
		{"local key set not JSON", `
    - {name: a, localJWKS: {secretName: jwks, key: bad.json}}`, jwtRoutes, "LocalJWKSInvalid", []string{`Secret default/jwks, key "bad.json": not a JSON Web Key Set`}},
		{"local and remote", `
    - {name: a, localJWKS: {secretName: jwks, key: jwks.json}, remoteJWKS: {uri: "https://idp.example.com/keys"}}`, jwtRoutes, "JWKSSourceConflict", []string{"set remoteJWKS or localJWKS, not both"}},
		{"unknown provider", `
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/keys"}}`, jwtRoutes + `
    jwtVerificationPolicy: {require: b}`, "JWTProviderNotDefined", []string{`spec.routes[0].jwtVerificationPolicy.require names provider "b", which spec.virtualhost.jwtProviders does not define (it defines "a")`}},
		{"require and disabled", `
    - {name: a, remoteJWKS: {uri: "https://idp.example.com/keys"}}`, jwtRoutes + `
    jwtVerificationPolicy: {require: a, disabled: true}`, "InvalidJWTVerificationPolicy", []string{"set require or disabled, not both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := jwtRoot(t, tc.providers, tc.routes)
			wantInvalid(t, g, "default", "root", problemJWT, tc.reason, tc.parts...)
			if http, https := hostNames(g); len(http)+len(https) > 0 {
				t.Errorf("served without the verification it asks for: %v %v", http, https)
			}
		})
	}
}

// localKeySet is a key set of one EC public key.
const localKeySet = `{"keys": [{"kty": "EC", "kid": "k1", "crv": "P-256", "alg": "ES256",
  "x": "fx0la2JeenKWZGvyY6qg9kd3UcxyehHQWHjg046lND8", "y": "Aysj0lDsAO7oY_bw0eZ5feSfSxnZrvEFFhc1ynIb3ZQ"}]}`

// A key set in a Secret of the root's namespace is read into the provider; no
// cluster is made for it.
func TestJWTLocalKeySet(t *testing.T) {
	g := jwtRoot(t, `
    - {name: a, default: true, localJWKS: {secretName: jwks, key: jwks.json}}`, jwtRoutes)
	if s := statusOf(g, "default", "root"); s.Status != StatusValid || len(s.Errors) > 0 {
		t.Fatalf("status %s: %s", s.Status, s.Description)
	}
	svh := httpsHost(g, "api.example.com")
	if svh == nil || len(svh.JWTProviders) != 1 || svh.JWTProviders[0].LocalJWKS != localKeySet || svh.JWTProviders[0].RemoteJWKS != nil {
		t.Fatalf("secure host providers = %+v", svh)
	}
	if c := svh.JWKSClusters(); len(c) != 0 {
		t.Errorf("key set clusters %v, want none", c)
	}
}

func TestJWTProvidersNeedTLS(t *testing.T) {
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: api.example.com
    jwtProviders: [{name: a, remoteJWKS: {uri: "https://idp.example.com/keys"}}]
  routes: [{services: [{name: web, port: 80}]}]
`))
	wantInvalid(t, g, "default", "root", problemJWT, "JWTVerificationNotPermitted", "spec.virtualhost.jwtProviders needs spec.virtualhost.tls.secretName")
}

// The default provider is required where a route names none; disabled routes
// say so; an included route naming a provider its root lacks answers 503 (a
// warning on it), and permitInsecure does not serve a verified route over HTTP.
func TestJWTRequirementsOfRoutes(t *testing.T) {
	cert := testutil.SelfSigned("api.example.com")
	g := build(proxy(t, `
metadata: {name: root}
spec:
  virtualhost:
    fqdn: api.example.com
    tls: {secretName: cert}
    jwtProviders:
    - {name: main, default: true, remoteJWKS: {uri: "https://idp.example.com/keys"}}
    - {name: other, remoteJWKS: {uri: "http://keys.example.com:8080/jwks.json", dnsLookupFamily: v4}}
  includes: [{name: team, conditions: [{prefix: /team}]}]
  routes:
  - services: [{name: web, port: 80}]
    permitInsecure: true
  - conditions: [{prefix: /other}]
    services: [{name: web, port: 80}]
    jwtVerificationPolicy: {require: other}
  - conditions: [{prefix: /open}]
    services: [{name: web, port: 80}]
    jwtVerificationPolicy: {disabled: true}
    permitInsecure: true
`), proxy(t, `
metadata: {name: team}
spec:
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /x}]
    services: [{name: web, port: 80}]
    jwtVerificationPolicy: {require: nobody}
`), tlsSecret("default", "cert", cert.CertPEM, cert.KeyPEM))
	wantWarning(t, g, "default", "root", problemInsecure, "PermitInsecureIgnored", "spec.routes[0].permitInsecure is ignored on api.example.com: the route requires a JSON Web Token")
	wantWarning(t, g, "default", "team", problemJWT, "JWTProviderNotDefined", `spec.routes[1] answers 503 on api.example.com: its jwtVerificationPolicy.require names provider "nobody"`)
	svh := httpsHost(g, "api.example.com")
	if svh == nil || len(svh.JWTProviders) != 2 {
		t.Fatalf("secure host = %+v, want two providers", svh)
	}
	got := map[string]string{}
	for _, r := range svh.Routes {
		v := r.JWT.Provider
		if r.JWT.Disabled {
			v = "disabled"
		}
		if r.DirectStatus != 0 {
			v += " " + strings.TrimSpace(viewProxyRoute(r)[strings.LastIndex(viewProxyRoute(r), " "):])
		}
		got[r.Path.Value] = v
	}
	want := map[string]string{"/": "main", "/other": "other", "/open": "disabled", "/team": "main", "/team/x": " 503"}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("route %s requires %q, want %q (all: %v)", path, got[path], w, got)
		}
	}
	for _, vh := range g.HTTP {
		for _, r := range vh.Routes {
			if served := !r.HTTPSRedirect; served != (r.Path.Value == "/open") {
				t.Errorf("plain HTTP %s: served = %v", r.Path.Value, served)
			}
		}
	}
	clusters := map[string]*Cluster{}
	for _, c := range g.Clusters() {
		clusters[c.Name] = c
	}
	if c := clusters["dnsname/https/idp.example.com"]; c == nil || c.ExternalName != "idp.example.com" || c.Port != 443 || c.Protocol != "tls" || c.UpstreamValidation.ServerName != "idp.example.com" {
		t.Errorf("https key set cluster = %+v", c)
	}
	var other *Cluster
	for name, c := range clusters {
		if strings.HasPrefix(name, "dnsname/http/keys.example.com:8080/") {
			other = c
		}
	}
	if other == nil || other.Port != 8080 || other.Protocol != "" || other.DNSLookupFamily != "v4" {
		t.Errorf("http key set cluster = %+v (clusters %v)", other, clusters)
	}
}
