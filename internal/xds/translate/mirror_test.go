package translate

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/portico-dev/portico/internal/dag"
)

// A route's mirrors become request_mirror_policies (a share in millionths), and their
// clusters are published with the others, by the full and the incremental translation.
func TestMirrorsTranslate(t *testing.T) {
	web, shadow, half := testCluster("team", "web", 80), testCluster("team", "shadow", 80), testCluster("team", "half", 80)
	r := route(dag.PathPrefix, "/", web)
	r.Mirrors = []*dag.Mirror{{Cluster: shadow}, {Cluster: half, Numerator: 1, Denominator: 3}}
	g := &dag.Graph{HTTP: []*dag.VirtualHost{{Name: "m.example.com", Routes: []*dag.Route{r}}}}
	check := func(name string, res *Resources) {
		t.Helper()
		checkMarshal(t, res)
		published := map[string]bool{}
		for _, c := range res.Clusters {
			published[c.(*clusterv3.Cluster).Name] = true
		}
		if !published[shadow.Name] || !published[half.Name] {
			t.Errorf("%s: mirror clusters not published: %v", name, published)
		}
	}
	res, err := Translate(g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check("Translate", res)
	var rc *routev3.RouteConfiguration
	for _, x := range res.Routes {
		rc = x.(*routev3.RouteConfiguration)
	}
	var ra *routev3.RouteAction
	for _, vh := range rc.GetVirtualHosts() {
		if vh.Name == "m.example.com" {
			ra = vh.Routes[0].GetRoute()
		}
	}
	mp := ra.GetRequestMirrorPolicies()
	if len(mp) != 2 || mp[0].Cluster != shadow.Name || mp[0].RuntimeFraction != nil || mp[1].Cluster != half.Name ||
		mp[1].RuntimeFraction.GetDefaultValue().GetNumerator() != 333_333 || mp[1].RuntimeFraction.GetDefaultValue().GetDenominator() != typev3.FractionalPercent_MILLION {
		t.Errorf("request_mirror_policies = %v", mp)
	}

	inc, err := NewIncremental(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ires, err := inc.Translate(g)
	if err != nil {
		t.Fatal(err)
	}
	check("Incremental", ires)
}

// An endpoint checked on another port (HTTPProxy healthPort) says so in its
// health_check_config; the others keep none.
func TestEndpointHealthPortTranslates(t *testing.T) {
	c := testCluster("team", "web", 80, dag.Endpoint{Address: "10.0.0.1", Port: 8080, HealthPort: 9090}, dag.Endpoint{Address: "10.0.0.2", Port: 8080})
	cla := loadAssignment(c)
	if err := cla.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	eps := cla.Endpoints[0].LbEndpoints
	if got := eps[0].GetEndpoint().GetHealthCheckConfig().GetPortValue(); got != 9090 {
		t.Errorf("health_check_config.port_value = %d, want 9090", got)
	}
	if eps[1].GetEndpoint().GetHealthCheckConfig() != nil {
		t.Errorf("an endpoint checked on its own port has a health_check_config")
	}
}

// An internal redirect policy becomes the route's internal_redirect_policy, SafeOnly and
// a denied repeated route as Envoy's predicates.
func TestInternalRedirectTranslates(t *testing.T) {
	p := internalRedirectPolicy(&dag.InternalRedirect{MaxRedirects: 2, Codes: []uint32{301, 302}, CrossScheme: "SafeOnly", DenyRepeatedRoute: true})
	if err := p.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	if p.GetMaxInternalRedirects().GetValue() != 2 || len(p.RedirectResponseCodes) != 2 || !p.AllowCrossSchemeRedirect || len(p.Predicates) != 2 ||
		p.Predicates[0].Name != "envoy.internal_redirect_predicates.safe_cross_scheme" || p.Predicates[1].Name != "envoy.internal_redirect_predicates.previous_routes" {
		t.Errorf("policy = %v", p)
	}
	if p := internalRedirectPolicy(&dag.InternalRedirect{MaxRedirects: 1, Codes: []uint32{302}, CrossScheme: "Never"}); p.AllowCrossSchemeRedirect || len(p.Predicates) != 0 {
		t.Errorf("Never: %v", p)
	}
}

// A cluster's slow start goes in the lb config of its policy, and passes validation.
func TestSlowStartTranslates(t *testing.T) {
	for _, lb := range []dag.LoadBalancer{dag.LBRoundRobin, dag.LBWeightedLeastRequest} {
		c := testCluster("team", "web", 80)
		c.LoadBalancer = lb
		c.SlowStart = &dag.SlowStart{Window: 30e9, Aggression: 1.5, MinWeightPercent: 20}
		out := cluster(c, Global{ConnectTimeout: 2e9})
		if err := out.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		var ss *clusterv3.Cluster_SlowStartConfig
		if lb == dag.LBRoundRobin {
			ss = out.GetRoundRobinLbConfig().GetSlowStartConfig()
		} else {
			ss = out.GetLeastRequestLbConfig().GetSlowStartConfig()
		}
		if ss.GetSlowStartWindow().AsDuration() != 30e9 || ss.GetAggression().GetDefaultValue() != 1.5 || ss.GetMinWeightPercent().GetValue() != 20 {
			t.Errorf("%s: slow start = %v", lb, ss)
		}
	}
}
