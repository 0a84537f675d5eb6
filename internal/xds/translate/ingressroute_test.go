package translate

import (
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

func dur(d time.Duration) *time.Duration { return &d }

// translateHost translates a graph of one plain-HTTP virtual host and returns its routes.
func translateHost(t *testing.T, opts Options, routes ...*dag.Route) []*routev3.Route {
	t.Helper()
	g := &dag.Graph{HTTP: []*dag.VirtualHost{{Name: "ir.example.com", Routes: routes}}}
	res, err := Translate(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.Routes[0].(*routev3.RouteConfiguration).VirtualHosts[0].Routes
}

func prefixMatch(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func toCluster(name string) *routev3.RouteAction {
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}
}

// IngressRoute matches are string prefixes: Envoy's "prefix", value kept as is.
func TestStringPrefixTranslatesToPrefix(t *testing.T) {
	web := testCluster("team", "web", 80)
	got := translateHost(t, Options{},
		route(dag.PathStringPrefix, "/app", web),
		route(dag.PathStringPrefix, "/app/", web),
		route(dag.PathStringPrefix, "/", web),
	)
	want := []*routev3.Route{
		{Name: "prefix:/app", Match: prefixMatch("/app"), Action: &routev3.Route_Route{Route: toCluster("team/web/80")}},
		{Name: "prefix:/app/", Match: prefixMatch("/app/"), Action: &routev3.Route_Route{Route: toCluster("team/web/80")}},
		{Name: "prefix:/", Match: prefixMatch("/"), Action: &routev3.Route_Route{Route: toCluster("team/web/80")}},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

// An HTTPSRedirect route answers 301 to https, on Options.HTTPSRedirectPort when set.
func TestHTTPSRedirectRoute(t *testing.T) {
	for _, port := range []uint32{0, 8443} {
		got := translateHost(t, Options{HTTPSRedirectPort: port}, &dag.Route{Path: dag.PathMatch{Kind: dag.PathStringPrefix, Value: "/secure"}, HTTPSRedirect: true})
		want := []*routev3.Route{{
			Name:  "prefix:/secure",
			Match: prefixMatch("/secure"),
			Action: &routev3.Route_Redirect{Redirect: &routev3.RedirectAction{
				SchemeRewriteSpecifier: &routev3.RedirectAction_HttpsRedirect{HttpsRedirect: true},
				ResponseCode:           routev3.RedirectAction_MOVED_PERMANENTLY,
				PortRedirect:           port,
			}},
		}}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("port %d: routes (-want +got):\n%s", port, diff)
		}
	}
}

// A DirectStatus route (a delegation that cannot be served) answers with that status.
func TestDirectStatusRoute(t *testing.T) {
	got := translateHost(t, Options{}, &dag.Route{Path: dag.PathMatch{Kind: dag.PathStringPrefix, Value: "/broken"}, DirectStatus: 503})
	want := []*routev3.Route{{
		Name:   "prefix:/broken",
		Match:  prefixMatch("/broken"),
		Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 503}},
	}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

func TestRouteTimeouts(t *testing.T) {
	web := testCluster("team", "web", 80)
	for _, tc := range []struct {
		name     string
		timeouts *dag.TimeoutPolicy
		want     *routev3.RouteAction
	}{
		{"none", nil, toCluster("team/web/80")},
		{"both unset", &dag.TimeoutPolicy{}, toCluster("team/web/80")},
		{"request", &dag.TimeoutPolicy{Request: dur(time.Second)}, &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "team/web/80"}, Timeout: durationpb.New(time.Second)}},
		{"idle", &dag.TimeoutPolicy{Idle: dur(90 * time.Second)}, &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "team/web/80"}, IdleTimeout: durationpb.New(90 * time.Second)}},
		{"infinite: 0s", &dag.TimeoutPolicy{Request: dur(0), Idle: dur(0)}, &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "team/web/80"}, Timeout: &durationpb.Duration{}, IdleTimeout: &durationpb.Duration{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := route(dag.PathStringPrefix, "/", web)
			r.Timeouts = tc.timeouts
			got := translateHost(t, Options{}, r)[0].GetRoute()
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("route action (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryPolicyTranslation(t *testing.T) {
	all := []uint32{500, 501, 502, 503, 504, 505, 506, 507, 508, 509}
	for _, tc := range []struct {
		name  string
		retry *dag.RetryPolicy
		want  *routev3.RetryPolicy
	}{
		{"none", nil, nil},
		{"listed codes", &dag.RetryPolicy{NumRetries: 3, OnStatusCodes: []uint32{501, 502}},
			&routev3.RetryPolicy{RetryOn: "retriable-status-codes", NumRetries: wrapperspb.UInt32(3), RetriableStatusCodes: []uint32{501, 502}}},
		{"502 and 503 but not 504", &dag.RetryPolicy{NumRetries: 1, OnStatusCodes: []uint32{502, 503}},
			&routev3.RetryPolicy{RetryOn: "retriable-status-codes", NumRetries: wrapperspb.UInt32(1), RetriableStatusCodes: []uint32{502, 503}}},
		{"502, 503 and 504", &dag.RetryPolicy{NumRetries: 1, OnStatusCodes: []uint32{502, 503, 504}},
			&routev3.RetryPolicy{RetryOn: "gateway-error,retriable-status-codes", NumRetries: wrapperspb.UInt32(1), RetriableStatusCodes: []uint32{502, 503, 504}}},
		{"50x", &dag.RetryPolicy{NumRetries: 2, OnStatusCodes: all},
			&routev3.RetryPolicy{RetryOn: "gateway-error,retriable-status-codes", NumRetries: wrapperspb.UInt32(2), RetriableStatusCodes: all}},
		{"zero retries is still set", &dag.RetryPolicy{NumRetries: 0, OnStatusCodes: []uint32{500}},
			&routev3.RetryPolicy{RetryOn: "retriable-status-codes", NumRetries: wrapperspb.UInt32(0), RetriableStatusCodes: []uint32{500}}},
		{"per-try timeout", &dag.RetryPolicy{NumRetries: 7, OnStatusCodes: []uint32{501}, PerTryTimeout: 150 * time.Millisecond},
			&routev3.RetryPolicy{RetryOn: "retriable-status-codes", NumRetries: wrapperspb.UInt32(7), RetriableStatusCodes: []uint32{501}, PerTryTimeout: durationpb.New(150 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := route(dag.PathStringPrefix, "/", testCluster("team", "web", 80))
			r.Retry = tc.retry
			got := translateHost(t, Options{}, r)[0].GetRoute().GetRetryPolicy()
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("retry policy (-want +got):\n%s", diff)
			}
			if tc.retry != nil && got.NumRetries == nil {
				t.Error("num_retries must always be set: unset means Envoy's default of 1")
			}
		})
	}
}

// Routes to a consistent-hashing cluster hash the client address.
func TestHashPolicyOnConsistentHashingRoutes(t *testing.T) {
	sourceIP := []*routev3.RouteAction_HashPolicy{{PolicySpecifier: &routev3.RouteAction_HashPolicy_ConnectionProperties_{
		ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true},
	}}}
	withLB := func(name string, lb dag.LoadBalancer) *dag.Cluster {
		c := testCluster("team", name, 80)
		c.Name += "/" + string(lb)
		c.LoadBalancer = lb
		return c
	}
	for _, tc := range []struct {
		name     string
		clusters []*dag.Cluster
		want     []*routev3.RouteAction_HashPolicy
	}{
		{"round robin (default)", []*dag.Cluster{testCluster("team", "a", 80)}, nil},
		{"round robin", []*dag.Cluster{withLB("a", dag.LBRoundRobin)}, nil},
		{"least request", []*dag.Cluster{withLB("a", dag.LBWeightedLeastRequest)}, nil},
		{"random", []*dag.Cluster{withLB("a", dag.LBRandom)}, nil},
		{"ring hash", []*dag.Cluster{withLB("a", dag.LBRingHash)}, sourceIP},
		{"maglev", []*dag.Cluster{withLB("a", dag.LBMaglev)}, sourceIP},
		{"one of several", []*dag.Cluster{withLB("a", dag.LBRandom), withLB("b", dag.LBMaglev)}, sourceIP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &dag.Route{Path: dag.PathMatch{Kind: dag.PathStringPrefix, Value: "/"}}
			for _, c := range tc.clusters {
				r.Clusters = append(r.Clusters, &dag.WeightedCluster{Cluster: c, Weight: 1})
			}
			got := translateHost(t, Options{}, r)[0].GetRoute().GetHashPolicy()
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("hash policy (-want +got):\n%s", diff)
			}
		})
	}
}

// A weight of 0 is kept: that service gets no traffic.
func TestWeightedClustersKeepZeroWeights(t *testing.T) {
	r := &dag.Route{Path: dag.PathMatch{Kind: dag.PathStringPrefix, Value: "/"}, Clusters: []*dag.WeightedCluster{
		{Cluster: testCluster("team", "stable", 80), Weight: 100},
		{Cluster: testCluster("team", "canary", 80), Weight: 0},
	}}
	got := translateHost(t, Options{}, r)[0].GetRoute()
	want := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{
		Clusters: []*routev3.WeightedCluster_ClusterWeight{
			{Name: "team/stable/80", Weight: wrapperspb.UInt32(100)},
			{Name: "team/canary/80", Weight: wrapperspb.UInt32(0)},
		},
	}}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("route action (-want +got):\n%s", diff)
	}
}

func TestClusterLbPolicyAndHealthChecks(t *testing.T) {
	for _, tc := range []struct {
		lb   dag.LoadBalancer
		want clusterv3.Cluster_LbPolicy
	}{
		{"", clusterv3.Cluster_ROUND_ROBIN},
		{dag.LBRoundRobin, clusterv3.Cluster_ROUND_ROBIN},
		{dag.LBWeightedLeastRequest, clusterv3.Cluster_LEAST_REQUEST},
		{dag.LBRingHash, clusterv3.Cluster_RING_HASH},
		{dag.LBMaglev, clusterv3.Cluster_MAGLEV},
		{dag.LBRandom, clusterv3.Cluster_RANDOM},
	} {
		t.Run(string(tc.lb), func(t *testing.T) {
			c := testCluster("team", "web", 80)
			c.LoadBalancer = tc.lb
			res, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{{Name: "ir.example.com", Routes: []*dag.Route{route(dag.PathStringPrefix, "/", c)}}}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Clusters[0].(*clusterv3.Cluster).LbPolicy; got != tc.want {
				t.Errorf("lb_policy = %v, want %v", got, tc.want)
			}
		})
	}

	c := testCluster("team", "web", 80)
	c.Name += "/hc"
	c.HealthCheck = &dag.HealthCheck{Path: "/healthz", Host: "contour-envoy-healthcheck", Interval: 5 * time.Second, Timeout: 2 * time.Second, UnhealthyThreshold: 3, HealthyThreshold: 2}
	plain := testCluster("team", "other", 80)
	res, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{{Name: "ir.example.com", Routes: []*dag.Route{
		route(dag.PathStringPrefix, "/hc", c), route(dag.PathStringPrefix, "/", plain),
	}}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []*corev3.HealthCheck{{
		Timeout:            durationpb.New(2 * time.Second),
		Interval:           durationpb.New(5 * time.Second),
		NoTrafficInterval:  durationpb.New(5 * time.Second),
		UnhealthyThreshold: wrapperspb.UInt32(3),
		HealthyThreshold:   wrapperspb.UInt32(2),
		HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
			Path: "/healthz",
			Host: "contour-envoy-healthcheck",
			// Every failure but 503 counts towards the threshold (seed 003).
			RetriableStatuses: []*typev3.Int64Range{{Start: 100, End: 503}, {Start: 504, End: 600}},
		}},
	}}
	clusters := map[string]*clusterv3.Cluster{}
	for _, r := range res.Clusters {
		clusters[r.(*clusterv3.Cluster).Name] = r.(*clusterv3.Cluster)
	}
	if diff := cmp.Diff(want, clusters["team/web/80/hc"].HealthChecks, protocmp.Transform()); diff != "" {
		t.Errorf("health checks (-want +got):\n%s", diff)
	}
	if hc := clusters["team/other/80"].HealthChecks; hc != nil {
		t.Errorf("a cluster without a health check got %v", hc)
	}
	if got := clusters["team/web/80/hc"].EdsClusterConfig.ServiceName; got != "team/web/80/hc" {
		t.Errorf("EDS service name = %q, want the cluster name", got)
	}
}

// Every IngressRoute feature at once, through the builder and the translator: Translate
// validates every resource (ValidateAll), so success means each shape is valid.
func TestIngressRouteEveryFeatureTranslates(t *testing.T) {
	cert := testutil.SelfSigned("shop.example.com", "www.shop.example.com")
	objs, problems := manifest.Decode("every-feature.yaml", []byte(`
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: root, namespace: infra}
spec:
  virtualhost:
    fqdn: shop.example.com
    aliases: [www.shop.example.com]
    tls: {secretName: certs/shop, minimumProtocolVersion: "1.2"}
  strategy: WeightedLeastRequest
  healthCheck: {path: /healthz}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /.well-known/acme-challenge, services: [{name: acme, port: 80}], permitInsecure: true}
  - {match: /shop, delegate: {name: shop, namespace: shop}}
  - {match: /gone, delegate: {name: missing, namespace: shop}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: shop, namespace: shop}
spec:
  routes:
  - match: /shop
    services:
    - {name: stable, port: 80, weight: 90, strategy: RingHash}
    - {name: canary, port: 80, weight: 10, strategy: Maglev}
    - {name: dark, port: 80, healthCheck: {path: /ready, intervalSeconds: 10}}
    timeoutPolicy: {request: 2s, idle: infinity}
    retryPolicy: {count: "3", onStatusCodes: [50x], perTryTimeout: 500ms}
  - match: /shop/api
    prefixRewrite: /
    service: {name: api, port: 8080, strategy: Random}
    timeoutPolicy: {request: infinity, idle: 0s}
    retryPolicy: {count: 0, onStatusCodes: ["501"]}
  - {match: /shop/public, services: [{name: stable, port: 80}], permitInsecure: true}
---
apiVersion: contour.heptio.com/v1beta1
kind: TLSCertificateDelegation
metadata: {name: shop, namespace: certs}
spec:
  delegations: [{secretName: shop, targetNamespaces: [infra]}]
---
apiVersion: v1
kind: Service
metadata: {name: stable, namespace: shop}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: stable, namespace: shop}
subsets: [{addresses: [{ip: 10.0.0.1}, {ip: 10.0.0.2}], ports: [{name: http, port: 8080}]}]
`))
	if len(problems) > 0 {
		t.Fatalf("manifest problems: %v", problems)
	}
	objs = append(objs, tlsSecretObject("certs", "shop", cert))
	g := dag.Build(store.FromObjects(objs), dag.Options{})
	for _, s := range g.Statuses {
		if s.Status != dag.StatusValid {
			t.Errorf("status of %s = %s: %s", s.Object, s.Status, s.Description)
		}
	}
	res, err := Translate(g, Options{HTTPSRedirectPort: 8443})
	if err != nil {
		t.Fatalf("translate: %v", err)
	}
	if len(res.Listeners) != 2 || len(res.Secrets) != 1 || len(res.Routes) != 3 {
		t.Fatalf("got %d listeners, %d route configurations, %d secrets; want 2, 3, 1", len(res.Listeners), len(res.Routes), len(res.Secrets))
	}
	summary := func(rc *routev3.RouteConfiguration, host string) []string {
		var out []string
		for _, vh := range rc.VirtualHosts {
			if vh.Name != host {
				continue
			}
			for _, r := range vh.Routes {
				line := r.Match.GetPrefix() + " "
				switch a := r.Action.(type) {
				case *routev3.Route_Redirect:
					line += "redirect"
				case *routev3.Route_DirectResponse:
					line += "direct"
				case *routev3.Route_Route:
					line += "route"
					if a.Route.RetryPolicy != nil {
						line += " retry"
					}
					if a.Route.HashPolicy != nil {
						line += " hash"
					}
					if a.Route.PrefixRewrite != "" {
						line += " rewrite=" + a.Route.PrefixRewrite
					}
				}
				out = append(out, line)
			}
		}
		return out
	}
	plain := res.Routes[0].(*routev3.RouteConfiguration)
	wantPlain := []string{
		"/.well-known/acme-challenge route",
		"/shop/public route",
		"/shop/api/ redirect",
		"/shop/api redirect",
		"/gone redirect",
		"/shop redirect",
		"/ redirect",
	}
	for _, host := range []string{"shop.example.com", "www.shop.example.com"} {
		if diff := cmp.Diff(wantPlain, summary(plain, host)); diff != "" {
			t.Errorf("%s plain-HTTP routes (-want +got):\n%s", host, diff)
		}
	}
	wantSecure := []string{
		"/.well-known/acme-challenge route",
		"/shop/public route",
		"/shop/api/ route retry rewrite=/",
		"/shop/api route retry rewrite=/",
		"/gone direct",
		"/shop route retry hash",
		"/ route",
	}
	for i, host := range []string{"shop.example.com", "www.shop.example.com"} {
		rc := res.Routes[1+i].(*routev3.RouteConfiguration)
		if rc.Name != RouteHTTPS(host) {
			t.Fatalf("route configuration %d is %q, want %q", 1+i, rc.Name, RouteHTTPS(host))
		}
		if diff := cmp.Diff(wantSecure, summary(rc, host)); diff != "" {
			t.Errorf("%s HTTPS routes (-want +got):\n%s", host, diff)
		}
	}
	var lbs []string
	for _, r := range res.Clusters {
		c := r.(*clusterv3.Cluster)
		lbs = append(lbs, strings.Join(strings.SplitN(c.Name, "/", 4)[:3], "/")+" "+c.LbPolicy.String()+" hc="+map[bool]string{true: "yes", false: "no"}[len(c.HealthChecks) > 0])
	}
	// spec.strategy and spec.healthCheck are defaults for the object's own services only.
	wantLBs := []string{
		"shop/api/8080 RANDOM hc=no",
		"shop/stable/80 RING_HASH hc=no",
		"shop/canary/80 MAGLEV hc=no",
		"shop/dark/80 ROUND_ROBIN hc=yes",
		"shop/stable/80 ROUND_ROBIN hc=no",
		"infra/web/80 LEAST_REQUEST hc=yes",
		"infra/acme/80 LEAST_REQUEST hc=yes",
	}
	if diff := cmp.Diff(wantLBs, lbs, cmp.Transformer("sort", sortedStrings)); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
}

func sortedStrings(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func tlsSecretObject(namespace, name string, c testutil.Cert) runtime.Object {
	objs, problems := manifest.Decode("secret.yaml", []byte(`
apiVersion: v1
kind: Secret
metadata: {name: `+name+`, namespace: `+namespace+`}
type: kubernetes.io/tls
stringData:
  tls.crt: |
`+indent(string(c.CertPEM), "    ")+`
  tls.key: |
`+indent(string(c.KeyPEM), "    ")))
	if len(problems) > 0 || len(objs) != 1 {
		panic(problems)
	}
	return objs[0]
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}
