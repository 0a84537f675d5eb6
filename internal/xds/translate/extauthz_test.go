package translate

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/testutil"
)

// An authorized HTTPS host: the ext_authz filter in its connection manager only,
// disabled by default and enabled by its routes with their context; the
// ExtensionService's cluster published. Translate validates every resource and packed
// config (ValidateAll).
func TestExtAuthzTranslation(t *testing.T) {
	cert := testutil.SelfSigned("a.example.com")
	ext := &dag.Cluster{Name: "extension/authns/auth", Service: k8stypes.NamespacedName{Namespace: "authns", Name: "auth"}, PortName: "extension",
		Protocol: "h2c", Endpoints: []dag.Endpoint{{Address: "10.0.0.7", Port: 9000}}}
	web := testCluster("default", "web", 80)
	checked := route(dag.PathPrefix, "/", web)
	checked.Authorization = &dag.RouteAuthorization{Context: map[string]string{"role": "admin"}}
	public := route(dag.PathPrefix, "/public", web)
	public.Authorization = &dag.RouteAuthorization{Disabled: true}
	timeout := 750 * time.Millisecond
	g := &dag.Graph{
		HTTP: []*dag.VirtualHost{{Name: "plain.example.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}},
		HTTPS: []*dag.SecureVirtualHost{{
			VirtualHost:   dag.VirtualHost{Name: "a.example.com", Routes: []*dag.Route{public, checked}},
			Secret:        &dag.Secret{Name: "default/cert", Cert: cert.CertPEM, Key: cert.KeyPEM},
			Authorization: &dag.Authorization{Cluster: ext, Timeout: &timeout, FailOpen: true},
		}},
	}
	for _, incremental := range []bool{false, true} {
		var res *Resources
		var err error
		if incremental {
			var inc *Incremental
			if inc, err = NewIncremental(Options{}); err != nil {
				t.Fatal(err)
			}
			res, err = inc.Translate(g)
		} else {
			res, err = Translate(g, Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		var https *listenerv3.Listener
		for _, l := range res.Listeners {
			if l.(*listenerv3.Listener).Name == ListenerHTTPS {
				https = l.(*listenerv3.Listener)
			}
			if l.(*listenerv3.Listener).Name == ListenerHTTP {
				if names := filterNames(decodeHCM(t, l.(*listenerv3.Listener).FilterChains[0])); slices.Contains(names, wellknown.HTTPExternalAuthorization) {
					t.Errorf("plain listener filters %v, want no ext_authz", names)
				}
			}
		}
		hcm := decodeHCM(t, https.FilterChains[0])
		names := filterNames(hcm)
		i := slices.Index(names, wellknown.HTTPExternalAuthorization)
		if i < 0 || names[len(names)-1] != wellknown.Router {
			t.Fatalf("filters %v", names)
		}
		f := hcm.HttpFilters[i]
		if !f.Disabled {
			t.Errorf("ext_authz is not disabled by default: hosts sharing the connections would be checked")
		}
		var got extauthzv3.ExtAuthz
		if err := f.GetTypedConfig().UnmarshalTo(&got); err != nil {
			t.Fatal(err)
		}
		want := &extauthzv3.ExtAuthz{
			Services: &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
				TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "extension/authns/auth"}},
				Timeout:         durationpb.New(timeout),
			}},
			TransportApiVersion:       corev3.ApiVersion_V3,
			FailureModeAllow:          true,
			FailureModeAllowHeaderAdd: true, // Envoy marks a request let through unchecked only when asked
			StatusOnError:             &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
			IncludePeerCertificate:    true,
		}
		if diff := cmp.Diff(want, &got, protocmp.Transform()); diff != "" {
			t.Errorf("ext_authz (-want +got):\n%s", diff)
		}
		perRoute := map[string]*routev3.Route{}
		for _, rc := range res.Routes {
			for _, vh := range rc.(*routev3.RouteConfiguration).VirtualHosts {
				if vh.Name != "a.example.com" {
					continue
				}
				for _, r := range vh.Routes {
					perRoute[r.Match.GetPrefix()+r.Match.GetPathSeparatedPrefix()] = r
				}
			}
		}
		var fc routev3.FilterConfig
		if err := perRoute["/"].TypedPerFilterConfig[wellknown.HTTPExternalAuthorization].UnmarshalTo(&fc); err != nil {
			t.Fatalf("route /: %v", err)
		}
		var settings extauthzv3.ExtAuthzPerRoute
		if err := fc.GetConfig().UnmarshalTo(&settings); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"role": "admin"}, settings.GetCheckSettings().GetContextExtensions()); diff != "" || fc.Disabled {
			t.Errorf("route / context (-want +got):\n%s (disabled %v)", diff, fc.Disabled)
		}
		var off extauthzv3.ExtAuthzPerRoute
		if err := perRoute["/public"].TypedPerFilterConfig[wellknown.HTTPExternalAuthorization].UnmarshalTo(&off); err != nil || !off.GetDisabled() {
			t.Errorf("route /public: %v, disabled %v", err, off.GetDisabled())
		}
		found := false
		for _, c := range res.Clusters {
			c := c.(*clusterv3.Cluster)
			if c.Name == "extension/authns/auth" {
				found = true
				if c.TypedExtensionProtocolOptions[HTTPProtocolOptionsName] == nil {
					t.Errorf("the extension's cluster does not speak HTTP/2")
				}
			}
		}
		if !found {
			t.Errorf("incremental %v: the extension's cluster is not published", incremental)
		}
	}
}

func filterNames(hcm *hcmv3.HttpConnectionManager) []string {
	var out []string
	for _, f := range hcm.HttpFilters {
		out = append(out, f.Name)
	}
	return out
}

// serviceType http and withRequestBody: http_service on the ExtensionService's cluster
// (HTTP/1.1) with the path prefix, the allowed headers (the filter's allowed_headers,
// as Contour emits them) and allowed upstream headers, the timeout (Envoy's default
// without one, since server_uri needs one), and with_request_body. Translate validates
// every resource and packed config (ValidateAll).
func TestExtAuthzHTTPTranslation(t *testing.T) {
	cert := testutil.SelfSigned("a.example.com")
	ext := &dag.Cluster{Name: "extension/authns/auth", Service: k8stypes.NamespacedName{Namespace: "authns", Name: "auth"}, PortName: "extension",
		Endpoints: []dag.Endpoint{{Address: "10.0.0.7", Port: 9000}}}
	web := testCluster("default", "web", 80)
	checked := route(dag.PathPrefix, "/", web)
	checked.Authorization = &dag.RouteAuthorization{}
	auth := &dag.Authorization{Cluster: ext,
		HTTP: &dag.HTTPAuthorization{PathPrefix: "/check",
			AllowedAuthorizationHeaders: []dag.HeaderNameMatch{{Kind: dag.MatchExact, Value: "x-a"}, {Kind: dag.MatchPrefix, Value: "X-B-", IgnoreCase: true}},
			AllowedUpstreamHeaders:      []dag.HeaderNameMatch{{Kind: dag.MatchSuffix, Value: "-user"}, {Kind: dag.MatchContains, Value: "tenant"}},
		},
		Body: &dag.AuthorizationBody{MaxRequestBytes: 512, AllowPartialMessage: true, PackAsBytes: true},
	}
	g := &dag.Graph{HTTPS: []*dag.SecureVirtualHost{{
		VirtualHost:   dag.VirtualHost{Name: "a.example.com", Routes: []*dag.Route{checked}},
		Secret:        &dag.Secret{Name: "default/cert", Cert: cert.CertPEM, Key: cert.KeyPEM},
		Authorization: auth,
	}}}
	exact := func(v string) *matcherv3.StringMatcher {
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: v}}
	}
	want := &extauthzv3.ExtAuthz{
		Services: &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{
			ServerUri:  &corev3.HttpUri{Uri: "http://extension.authns.auth/", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "extension/authns/auth"}, Timeout: durationpb.New(200 * time.Millisecond)},
			PathPrefix: "/check",
			AuthorizationResponse: &extauthzv3.AuthorizationResponse{AllowedUpstreamHeaders: &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{
				{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "-user"}},
				{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "tenant"}},
			}}},
		}},
		AllowedHeaders:         &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{exact("x-a"), {MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "X-B-"}, IgnoreCase: true}}},
		TransportApiVersion:    corev3.ApiVersion_V3,
		StatusOnError:          &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
		IncludePeerCertificate: true,
		WithRequestBody:        &extauthzv3.BufferSettings{MaxRequestBytes: 512, AllowPartialMessage: true, PackAsBytes: true},
	}
	check := func(t *testing.T, res *Resources) {
		t.Helper()
		for _, l := range res.Listeners {
			if l.(*listenerv3.Listener).Name != ListenerHTTPS {
				continue
			}
			hcm := decodeHCM(t, l.(*listenerv3.Listener).FilterChains[0])
			i := slices.Index(filterNames(hcm), wellknown.HTTPExternalAuthorization)
			if i < 0 {
				t.Fatalf("no ext_authz among %v", filterNames(hcm))
			}
			var got extauthzv3.ExtAuthz
			if err := hcm.HttpFilters[i].GetTypedConfig().UnmarshalTo(&got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, &got, protocmp.Transform()); diff != "" {
				t.Errorf("ext_authz (-want +got):\n%s", diff)
			}
		}
		for _, c := range res.Clusters {
			if c := c.(*clusterv3.Cluster); c.Name == ext.Name && c.TypedExtensionProtocolOptions[HTTPProtocolOptionsName] != nil {
				t.Errorf("the HTTP server's cluster speaks HTTP/2: %v", c.TypedExtensionProtocolOptions)
			}
		}
	}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
	// The incremental translator sees a change of the settings: the filter is the
	// listener's, so the chain is translated again.
	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inc.Translate(g); err != nil {
		t.Fatal(err)
	}
	timeout := time.Second
	auth.Timeout, auth.Body.MaxRequestBytes = &timeout, 64
	want.GetHttpService().GetServerUri().Timeout, want.WithRequestBody.MaxRequestBytes = durationpb.New(time.Second), 64
	g2 := *g
	g2.HTTPS = []*dag.SecureVirtualHost{{VirtualHost: g.HTTPS[0].VirtualHost, Secret: g.HTTPS[0].Secret, Authorization: auth}}
	res, err = inc.Translate(&g2)
	if err != nil {
		t.Fatal(err)
	}
	check(t, res)
}
