package translate

import (
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

const jwtManifest = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: api, namespace: team}
spec:
  virtualhost:
    fqdn: api.example.com
    tls: {secretName: cert}
    jwtProviders:
    - name: idp
      default: true
      issuer: https://idp.example.com
      audiences: [api]
      remoteJWKS:
        uri: https://idp.example.com/keys
        validation: {caSecret: idp-ca, subjectName: idp.example.com}
    - name: legacy
      forwardJWT: true
      remoteJWKS: {uri: "http://jwks.example.com:8080/jwks.json", timeout: 3s, cacheDuration: 1m, dnsLookupFamily: v4}
    - name: local
      localJWKS: {secretName: jwks, key: jwks.json}
  includes:
  - {name: reports, conditions: [{prefix: /reports}]}
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /legacy}]
    services: [{name: web, port: 80}]
    jwtVerificationPolicy: {require: legacy}
  - conditions: [{prefix: /public}]
    services: [{name: web, port: 80}]
    jwtVerificationPolicy: {disabled: true}
    permitInsecure: true
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: reports, namespace: team}
spec:
  routes:
  - services: [{name: web, port: 80}]
  - conditions: [{prefix: /other}]
    services: [{name: web, port: 80}]
    jwtVerificationPolicy: {require: nobody}
---
apiVersion: v1
kind: Secret
metadata: {name: jwks, namespace: team}
stringData:
  jwks.json: '{"keys": [{"kty": "oct", "kid": "h1", "alg": "HS256", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYg"}]}'
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team}
spec: {ports: [{port: 80}]}
`

func jwtGraph(t *testing.T) *dag.Graph {
	t.Helper()
	objs, problems := manifest.Decode("jwt.yaml", []byte(jwtManifest))
	if len(problems) > 0 {
		t.Fatalf("manifest problems: %v", problems)
	}
	ca := testutil.SelfSigned("idp.example.com")
	caObjs, problems := manifest.Decode("ca.yaml", []byte(`
apiVersion: v1
kind: Secret
metadata: {name: idp-ca, namespace: team}
stringData:
  ca.crt: |
`+indent(string(ca.CertPEM), "    ")))
	if len(problems) > 0 {
		t.Fatalf("manifest problems: %v", problems)
	}
	objs = append(objs, caObjs...)
	objs = append(objs, tlsSecretObject("team", "cert", testutil.SelfSigned("api.example.com")))
	return dag.Build(store.FromObjects(objs), dag.Options{})
}

// The providers of an HTTPProxy become the jwt_authn filter of its server name's
// connection manager, each a requirement that routes select by name; key sets are
// DNS clusters named as upstream HTTPProxy names them.
func TestJWTProvidersTranslateToJWTAuthn(t *testing.T) {
	g := jwtGraph(t)
	for _, s := range g.Statuses {
		if s.Status != dag.StatusValid {
			t.Errorf("status of %s = %s: %s", s.Object, s.Status, s.Description)
		}
	}
	res, err := Translate(g, Options{HTTPSRedirectPort: 8443})
	if err != nil {
		t.Fatalf("translate: %v", err)
	}
	checkMarshal(t, res)

	var hcm hcmv3.HttpConnectionManager
	https := res.Listeners[1].(*listenerv3.Listener)
	if err := https.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatal(err)
	}
	jwtAt := slices.IndexFunc(hcm.HttpFilters, func(f *hcmv3.HttpFilter) bool { return f.Name == JWTAuthnFilterName })
	if n := len(hcm.HttpFilters); jwtAt < 0 || hcm.HttpFilters[n-1].Name != "envoy.filters.http.router" {
		t.Fatalf("http filters = %v, want jwt_authn among them, the router last", hcm.HttpFilters)
	}
	var got jwtv3.JwtAuthentication
	if err := hcm.HttpFilters[jwtAt].GetTypedConfig().UnmarshalTo(&got); err != nil {
		t.Fatal(err)
	}
	idpCluster := clusterNamed(t, res, "dnsname/https/idp.example.com/")
	want := &jwtv3.JwtAuthentication{
		Providers: map[string]*jwtv3.JwtProvider{
			"idp": {
				Issuer: "https://idp.example.com", Audiences: []string{"api"},
				JwksSourceSpecifier: &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{
					HttpUri:       &corev3.HttpUri{Uri: "https://idp.example.com/keys", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: idpCluster.Name}, Timeout: durationpb.New(dag.DefaultJWKSTimeout)},
					CacheDuration: durationpb.New(dag.DefaultJWKSCacheDuration),
				}},
			},
			"legacy": {
				Forward: true,
				JwksSourceSpecifier: &jwtv3.JwtProvider_RemoteJwks{RemoteJwks: &jwtv3.RemoteJwks{
					HttpUri:       &corev3.HttpUri{Uri: "http://jwks.example.com:8080/jwks.json", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "(compared below)"}, Timeout: durationpb.New(3e9)},
					CacheDuration: durationpb.New(60e9),
				}},
			},
			"local": {
				JwksSourceSpecifier: &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
					InlineString: `{"keys": [{"kty": "oct", "kid": "h1", "alg": "HS256", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYg"}]}`,
				}}},
			},
		},
		RequirementMap: map[string]*jwtv3.JwtRequirement{
			"idp":    {RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "idp"}},
			"legacy": {RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "legacy"}},
			"local":  {RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "local"}},
		},
	}
	if diff := cmp.Diff(want, &got, protocmp.Transform(), protocmp.IgnoreFields(&corev3.HttpUri{}, "cluster")); diff != "" {
		t.Errorf("jwt_authn (-want +got):\n%s", diff)
	}

	// The https key set: STRICT_DNS over TLS, verified by the CA with its SNI.
	if idpCluster.GetType() != clusterv3.Cluster_STRICT_DNS {
		t.Errorf("key set cluster type = %v, want STRICT_DNS", idpCluster.GetType())
	}
	var tlsCtx tlsv3.UpstreamTlsContext
	if err := idpCluster.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tlsCtx); err != nil {
		t.Fatalf("key set cluster transport socket: %v", err)
	}
	if tlsCtx.Sni != "idp.example.com" || tlsCtx.GetCommonTlsContext().GetValidationContext().GetTrustedCa() == nil {
		t.Errorf("key set TLS = %v, want SNI idp.example.com and the CA", &tlsCtx)
	}
	legacy := clusterNamed(t, res, "dnsname/http/jwks.example.com:8080")
	if legacy.GetTransportSocket() != nil || legacy.DnsLookupFamily != clusterv3.Cluster_V4_ONLY {
		t.Errorf("http key set cluster = %v, want plain text, IPv4", legacy)
	}
	if got.Providers["legacy"].GetRemoteJwks().GetHttpUri().GetCluster() != legacy.Name {
		t.Errorf("legacy provider's cluster = %q, want %q", got.Providers["legacy"].GetRemoteJwks().GetHttpUri().GetCluster(), legacy.Name)
	}

	// Routes: the default provider where none is named, the named one, disabled;
	// a provider the root lacks answers 503 rather than serving unprotected.
	perRoute := map[string]*jwtv3.PerRouteConfig{}
	var direct []string
	for _, r := range routesOf(t, res, "https/api.example.com") {
		if r.GetDirectResponse() != nil {
			if r.GetDirectResponse().GetStatus() == 503 {
				direct = append(direct, r.Name)
			}
			continue
		}
		a := r.TypedPerFilterConfig[JWTAuthnFilterName]
		if a == nil {
			t.Errorf("route %s has no jwt_authn configuration", r.Name)
			continue
		}
		var pr jwtv3.PerRouteConfig
		if err := a.UnmarshalTo(&pr); err != nil {
			t.Fatal(err)
		}
		perRoute[r.Name] = &pr
	}
	req := func(name string) *jwtv3.PerRouteConfig {
		return &jwtv3.PerRouteConfig{RequirementSpecifier: &jwtv3.PerRouteConfig_RequirementName{RequirementName: name}}
	}
	wantPerRoute := map[string]*jwtv3.PerRouteConfig{
		"httpproxy/team/api:prefix:/":            req("idp"),
		"httpproxy/team/api:prefix:/legacy":      req("legacy"),
		"httpproxy/team/api:prefix:/public":      {RequirementSpecifier: &jwtv3.PerRouteConfig_Disabled{Disabled: true}},
		"httpproxy/team/reports:prefix:/reports": req("idp"),
	}
	if diff := cmp.Diff(wantPerRoute, perRoute, protocmp.Transform()); diff != "" {
		t.Errorf("per-route jwt_authn (-want +got):\n%s", diff)
	}
	if len(direct) != 1 || direct[0] != "httpproxy/team/reports:prefix:/reports/other" {
		t.Errorf("direct responses = %v, want the route requiring an unknown provider", direct)
	}
	// Over plain HTTP only the disabled route is served; the others redirect.
	for _, r := range routesOf(t, res, RouteHTTP) {
		if served := r.GetRoute() != nil; served != (r.Name == "httpproxy/team/api:prefix:/public") {
			t.Errorf("plain HTTP route %s: served = %v", r.Name, served)
		}
	}
}

func clusterNamed(t *testing.T, res *Resources, prefix string) *clusterv3.Cluster {
	t.Helper()
	for _, r := range res.Clusters {
		if c := r.(*clusterv3.Cluster); strings.HasPrefix(c.Name, prefix) {
			return c
		}
	}
	t.Fatalf("no cluster named %s...", prefix)
	return nil
}

func routesOf(t *testing.T, res *Resources, config string) []*routev3.Route {
	t.Helper()
	for _, r := range res.Routes {
		if rc := r.(*routev3.RouteConfiguration); rc.Name == config {
			var out []*routev3.Route
			for _, vh := range rc.VirtualHosts {
				out = append(out, vh.Routes...)
			}
			return out
		}
	}
	t.Fatalf("no route configuration %s", config)
	return nil
}
