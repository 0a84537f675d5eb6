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
			TransportApiVersion:    corev3.ApiVersion_V3,
			FailureModeAllow:       true,
			StatusOnError:          &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
			IncludePeerCertificate: true,
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
