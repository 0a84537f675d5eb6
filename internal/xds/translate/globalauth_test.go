package translate

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/dag"
)

// The installation's extensions (dag.Graph.Extensions): the global authorization's
// ext_authz filter in the plain listener's connection manager, enabled for every
// request (a route disables it), with the server's timeout; the rate limit filter
// asking the ExtensionService's cluster with its timeout; both clusters published. Whole and incremental
// translations agree, and an incremental translator follows a change of the
// extensions (a new timeout). Translate validates every resource (ValidateAll).
func TestGlobalExtensionsTranslation(t *testing.T) {
	authCluster := &dag.Cluster{Name: "extension/auth/global", Service: k8stypes.NamespacedName{Namespace: "auth", Name: "global"}, PortName: "extension",
		Protocol: "h2c", Endpoints: []dag.Endpoint{{Address: "10.0.0.7", Port: 9000}}}
	rlCluster := &dag.Cluster{Name: "extension/infra/rl", Service: k8stypes.NamespacedName{Namespace: "infra", Name: "rl"}, PortName: "extension",
		Protocol: "h2c", Endpoints: []dag.Endpoint{{Address: "10.0.0.8", Port: 8081}}}
	web := testCluster("default", "web", 80)
	public := route(dag.PathPrefix, "/public", web)
	public.Authorization = &dag.RouteAuthorization{Disabled: true}
	graph := func(authTimeout, rlTimeout time.Duration) *dag.Graph {
		return &dag.Graph{
			HTTP: []*dag.VirtualHost{{Name: "plain.example.com", Routes: []*dag.Route{public, route(dag.PathPrefix, "/", web)}}},
			Extensions: &dag.Extensions{
				Authorization: &dag.Authorization{Cluster: authCluster, Timeout: &authTimeout},
				RateLimit:     &dag.RateLimitExtension{Cluster: rlCluster, Timeout: &rlTimeout},
			},
		}
	}
	opts := Options{RateLimit: &RateLimitService{ExtensionService: &k8stypes.NamespacedName{Namespace: "infra", Name: "rl"}, Domain: "contour"}}
	check := func(t *testing.T, res *Resources, authTimeout, rlTimeout time.Duration) {
		t.Helper()
		var plain *listenerv3.Listener
		for _, l := range res.Listeners {
			if l.(*listenerv3.Listener).Name == ListenerHTTP {
				plain = l.(*listenerv3.Listener)
			}
		}
		hcm := decodeHCM(t, plain.FilterChains[0])
		names := filterNames(hcm)
		i := slices.Index(names, wellknown.HTTPExternalAuthorization)
		if i < 0 {
			t.Fatalf("plain listener filters %v, want ext_authz", names)
		}
		if hcm.HttpFilters[i].Disabled {
			t.Error("the global ext_authz filter is disabled: requests without a route's configuration would go unchecked")
		}
		var az extauthzv3.ExtAuthz
		if err := hcm.HttpFilters[i].GetTypedConfig().UnmarshalTo(&az); err != nil {
			t.Fatal(err)
		}
		if g := az.GetGrpcService(); g.GetEnvoyGrpc().GetClusterName() != authCluster.Name || g.GetTimeout().AsDuration() != authTimeout {
			t.Errorf("ext_authz grpc service %v", g)
		}
		var rl ratelimitv3.RateLimit
		j := slices.Index(names, "envoy.filters.http.ratelimit")
		if j < 0 {
			t.Fatalf("plain listener filters %v, want the rate limit filter", names)
		}
		if err := hcm.HttpFilters[j].GetTypedConfig().UnmarshalTo(&rl); err != nil {
			t.Fatal(err)
		}
		if rl.GetRateLimitService().GetGrpcService().GetEnvoyGrpc().GetClusterName() != rlCluster.Name || rl.GetTimeout().AsDuration() != rlTimeout {
			t.Errorf("rate limit filter %v", &rl)
		}
		var clusters []string
		for _, c := range res.Clusters {
			clusters = append(clusters, c.(*clusterv3.Cluster).Name)
		}
		for _, want := range []string{authCluster.Name, rlCluster.Name} {
			if !slices.Contains(clusters, want) {
				t.Errorf("clusters %v, want %s", clusters, want)
			}
		}
		if slices.Contains(clusters, RateLimitClusterName) {
			t.Errorf("clusters %v: the address form's cluster is published too", clusters)
		}
	}
	res, err := Translate(graph(time.Second, 2*time.Second), opts)
	if err != nil {
		t.Fatal(err)
	}
	check(t, res, time.Second, 2*time.Second)
	inc, err := NewIncremental(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Second, 3 * time.Second} {
		res, err := inc.Translate(graph(d, 2*d))
		if err != nil {
			t.Fatal(err)
		}
		check(t, res, d, 2*d)
	}
}
