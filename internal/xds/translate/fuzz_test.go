package translate

import (
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/source/manifest"
	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// Seed manifests for the fuzzer's manifest argument: delegation across namespaces,
// policies (valid and not), TLS with a delegated certificate, load balancing, cycles.
const (
	fuzzDelegation = `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: app, namespace: infra}
spec:
  virtualhost: {fqdn: app.foo.com, aliases: [www.foo.com]}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /shop, delegate: {name: shop, namespace: shop}}
  - {match: /missing, delegate: {name: nothing}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: shop, namespace: shop}
spec:
  strategy: Maglev
  routes:
  - {match: /shop, services: [{name: a, port: 80, weight: 3}, {name: b, port: 80}, {name: a, port: 80, weight: 1}]}
  - {match: /shop/blog, delegate: {name: blog, namespace: blog}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: blog, namespace: blog}
spec:
  routes:
  - {match: /shop/blog, prefixRewrite: /, service: {name: blog, port: 8080, healthCheck: {path: /hz}}}
  - {match: /shop/blog/feed, services: [{name: blog, port: 8080}], timeoutPolicy: {request: 5, idle: 0s}}
`
	fuzzPolicies = `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: github, namespace: default}
spec:
  virtualhost: {fqdn: policies.foo.com}
  routes:
  - match: /contour
    services: [{name: contour, port: 80}]
    timeoutPolicy: {request: 1s, idle: 2s}
    retryPolicy: {count: "7", onStatusCodes: ["501", "502"], perTryTimeout: 150ms}
  - match: /odd
    services: [{name: odd, port: 80, strategy: RingHash}]
    timeoutPolicy: {request: infinity, idle: -1s}
    retryPolicy: {maxRetries: 0, onStatusCodes: [50x, 40x, 503], perTryTimeout: 99h}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: annotated
  annotations: {portico.dev/request-timeout: 2s, contour.heptio.com/num-retries: "3", projectcontour.io/retry-on-status-codes: "502,503,504", contour.heptio.com/retry-on: 5xx}
spec:
  rules: [{host: annotated.foo.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
`
	fuzzTLS = `
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: secure, namespace: infra}
spec:
  virtualhost: {fqdn: secure.foo.com, tls: {secretName: default/cert, minimumProtocolVersion: "1.3"}}
  healthCheck: {path: /healthz, intervalSeconds: 1}
  routes:
  - {match: /, services: [{name: web, port: 80}]}
  - {match: /.well-known/acme-challenge, services: [{name: acme, port: 80}], permitInsecure: true}
  - {match: /loop, delegate: {name: loop}}
---
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {name: loop, namespace: infra}
spec:
  routes: [{match: /loop, delegate: {name: loop}}]
---
apiVersion: contour.heptio.com/v1beta1
kind: TLSCertificateDelegation
metadata: {name: cert, namespace: default}
spec:
  delegations: [{secretName: cert, targetNamespaces: ["*"]}]
`
)

// FuzzBuildAndTranslate feeds arbitrary hosts, paths, path types, backends, TLS settings
// and manifests through the builder and the translator. An Ingress and two IngressRoutes
// (a root delegating to a vertex, with policies) are made of the string arguments, and
// the manifest argument adds any objects a YAML document can describe. Whatever the
// input, the build must not panic, every routing object must get exactly one status, no
// route may come from an IngressRoute that is not valid, and translation must succeed: an
// object the builder accepts must never produce a resource that fails ValidateAll.
// HTTPProxy seeds: includes with header conditions, policies, TLS, TCP proxying.
const (
	fuzzHTTPProxy = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: root, namespace: default}
spec:
  virtualhost: {fqdn: app.hp.com, tls: {secretName: cert, minimumProtocolVersion: "1.3"}}
  routes:
  - conditions: [{prefix: /}, {header: {name: x-canary, exact: "true"}}]
    services: [{name: canary, port: 80, protocol: h2c}]
    permitInsecure: true
  - conditions: [{exact: /health}]
    directResponsePolicy: {statusCode: 200, body: ok}
  - conditions: [{prefix: /old}]
    requestRedirectPolicy: {scheme: https, hostname: new.hp.com, statusCode: 301, prefix: /new}
  - services: [{name: web, port: 80, weight: 90, requestHeadersPolicy: {set: [{name: Host, value: internal}, {name: X-Ns, value: "%CONTOUR_NAMESPACE% 100%"}]}}, {name: web2, port: 80, weight: 10}]
    loadBalancerPolicy: {strategy: Cookie}
    timeoutPolicy: {response: 2s, idle: infinity, idleConnection: 30s}
    failurePolicy: {count: 2, perTryTimeout: 100ms, consecutive5xx: 3, baseEjectionTime: 1s}
    pathRewritePolicy: {replacePrefix: [{replacement: /}]}
    healthCheckPolicy: {path: /hz, expectedStatuses: [{start: 200, end: 300}]}
  includes:
  - name: team
    namespace: team-a
    conditions: [{prefix: /a}, {header: {name: x-tenant, notpresent: true}}, {queryParameter: {name: v, regex: "[0-9]+"}}]
    permitInsecure: true
  - {name: missing, conditions: [{prefix: /missing}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: team, namespace: team-a}
spec:
  routes:
  - conditions: [{regex: "/x.*"}, {cookie: user=test}, {userAgent: Chrome}]
    services: [{name: app, port: 443, protocol: tls, validation: {caSecret: ca, subjectName: app.team-a}}]
    retryPolicy: {count: 3, retryOn: [5xx, retriable-status-codes], retriableStatusCodes: [503]}
  includes:
  - {name: loop, conditions: [{prefix: /l}]}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: loop, namespace: team-a}
spec:
  includes: [{name: team, conditions: [{prefix: /m}]}]
`
	fuzzHTTPProxyTCP = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: pass, namespace: default}
spec:
  virtualhost: {fqdn: pass.hp.com, tls: {passthrough: true}}
  tcpproxy: {services: [{name: db, port: 5432}], healthCheckPolicy: {intervalSeconds: 5}}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: term, namespace: default}
spec:
  virtualhost: {fqdn: "*.term.hp.com", tls: {secretName: cert}}
  tcpproxy: {include: {name: backend, namespace: db}}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: backend, namespace: db}
spec:
  tcpproxy: {services: [{name: db, port: 5432, weight: 1}, {name: db2, port: 5432}], loadBalancerPolicy: {strategy: Random}}
`
)

// fuzzHeaders: headers policies on Server (a route's, services' alike and not) and on
// headers the data plane manages.
const fuzzHeaders = `
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: hdr}
spec:
  virtualhost: {fqdn: hdr.hp.com}
  routes:
  - conditions: [{prefix: /a}]
    services: [{name: web, port: 80, responseHeadersPolicy: {remove: [Server], set: [{name: Server, value: "%CONTOUR_SERVICE_NAME%"}]}}]
  - conditions: [{prefix: /b}]
    services: [{name: web, port: 80, responseHeadersPolicy: {remove: [server]}}, {name: web2, port: 80}]
    responseHeadersPolicy: {set: [{name: Server, value: b}, {name: Date, value: d}]}
  - services: [{name: web, port: 80, mirror: true}, {name: web2, port: 80, responseHeadersPolicy: {remove: [Server, te]}}]
    requestHeadersPolicy: {remove: [":path", Connection, X-Request-Id]}
`

func FuzzBuildAndTranslate(f *testing.F) {
	f.Add("foo.com", "/api", "Prefix", "web", int32(80), "", "*.foo.com", "/", "Exact", "secret", "")
	f.Add("", "", "ImplementationSpecific", "a", int32(0), "http", "*", "//", "Prefix", "", "")
	f.Add("*.a.b", "/x/../y", "Exact", "svc-1", int32(65535), "", "b.c", "/\x00", "Regex", "x", "")
	f.Add("FOO.com", "/%2f", "Prefix", "-bad", int32(-1), "p", "a..b", "/a b", "Exact", "", "")
	f.Add("foo.com", "/api", "RingHash", "web", int32(80), "3", "ir.foo.com", "/v", "1s", "cert", fuzzDelegation)
	f.Add("foo.com", "/", "Random", "web", int32(8080), "50x", "ir.foo.com", "/", "infinity", "", fuzzPolicies)
	f.Add("bar.com", "/x", "Maglev", "web", int32(443), "-1", "ir.foo.com", "/x/", "250ms", "cert", fuzzTLS)
	f.Add("hp.com", "/v[0-9]+/.*", "x-team", "web", int32(80), "a.*", "*.hp.com", "/api", "user=test", "cert", fuzzHTTPProxy)
	f.Add("hp.com", "/api|/b", "Cookie", "web", int32(81), "%REQ(x)%", "tcp.hp.com", "/", "Chrome", "cert", fuzzHTTPProxyTCP)
	f.Add("hp.com", "/", "Server", "web", int32(80), "Content-Length", "hdr.hp.com", "/b", "Upgrade", "", fuzzHeaders)
	cert := testutil.SelfSigned("foo.com", "*.foo.com")
	f.Fuzz(func(t *testing.T, host1, path1, type1, svc string, port int32, portName, host2, path2, type2, secret, manifestYAML string) {
		// Objects reach Portico decoded from JSON (the API server) or YAML turned into JSON
		// (manifests), and both decoders replace invalid UTF-8: so do the fuzzer's strings.
		utf := func(ss ...*string) {
			for _, s := range ss {
				*s = strings.ToValidUTF8(*s, "\uFFFD")
			}
		}
		utf(&host1, &path1, &type1, &svc, &portName, &host2, &path2, &type2, &secret)
		pt1, pt2 := networkingv1.PathType(type1), networkingv1.PathType(type2)
		ing := &networkingv1.Ingress{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fuzz"},
			Spec: networkingv1.IngressSpec{
				DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}},
				TLS:            []networkingv1.IngressTLS{{Hosts: []string{host1, host2}, SecretName: secret}},
				Rules: []networkingv1.IngressRule{
					{Host: host1, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
						{Path: path1, PathType: &pt1, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Name: portName, Number: port}}}},
					}}}},
					{Host: host2, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
						{Path: path2, PathType: &pt2, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: port}}}},
					}}}},
				},
			},
		}
		service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svc}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: portName, Port: port}}}}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: secret}, Data: map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM}}
		objs := []runtime.Object{ing, service, sec}
		objs = append(objs, fuzzIngressRoutes(host1, path1, type1, svc, port, portName, host2, path2, type2, secret)...)
		objs = append(objs, fuzzHTTPProxies(host1, path1, type1, svc, port, portName, host2, path2, type2, secret)...)
		decoded, _ := manifest.Decode("fuzz.yaml", []byte(manifestYAML))
		objs = append(objs, decoded...)
		s := store.FromObjects(objs)
		opts := dag.Options{}
		if port%3 == 1 {
			opts.RootNamespaces = []string{"default", "infra"}
		}
		if port%5 == 2 {
			opts.DisableIngress = true
		}
		g := dag.Build(s, opts)
		checkStatuses(t, s, opts, g)
		res, err := Translate(g, Options{HTTPSRedirectPort: uint32(port) & 0xffff})
		if err != nil {
			t.Fatalf("accepted input produced invalid xDS: %v\nstatuses: %+v", err, g.Statuses)
		}
		checkMarshal(t, res)
	})
}

// checkMarshal fails t unless every resource can be put on the wire: ValidateAll does
// not check that strings are UTF-8, and one resource the xDS server cannot marshal stops
// every update to every data plane.
func checkMarshal(t *testing.T, res *Resources) {
	t.Helper()
	for _, list := range [][]types.Resource{res.Listeners, res.Routes, res.Clusters, res.Endpoints, res.Secrets} {
		for _, r := range list {
			if _, err := proto.Marshal(r); err != nil {
				t.Fatalf("resource cannot be marshalled: %v\n%v", err, r)
			}
		}
	}
}

// fuzzIngressRoutes makes a root (default/root, for host2) that delegates path2 to a
// vertex (team/vertex) which delegates further, out of the fuzzer's strings.
func fuzzIngressRoutes(host1, path1, type1, svc string, port int32, portName, host2, path2, type2, secret string) []runtime.Object {
	str := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	weight := int64(port)
	root := &ingressroutev1.IngressRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "root"},
		Spec: ingressroutev1.IngressRouteSpec{
			VirtualHost: &ingressroutev1.VirtualHost{Fqdn: host2, Aliases: []string{"alias." + host2}},
			Routes: []ingressroutev1.Route{
				{
					Match:          path1,
					Services:       []ingressroutev1.Service{{Name: svc, Port: port, Strategy: type1}, {Name: "other", Port: 80, Weight: &weight}},
					PrefixRewrite:  path2,
					PermitInsecure: port%2 == 0,
					TimeoutPolicy:  &ingressroutev1.TimeoutPolicy{Request: str(type2), Idle: str(portName)},
					RetryPolicy: &ingressroutev1.RetryPolicy{
						Count:         str(portName),
						OnStatusCodes: []intstr.IntOrString{intstr.FromString(type2)},
						PerTryTimeout: str(type2),
					},
				},
				{Match: path2, Delegate: &ingressroutev1.Delegate{Name: "vertex", Namespace: "team"}},
			},
		},
	}
	if secret != "" {
		root.Spec.VirtualHost.TLS = &ingressroutev1.TLS{SecretName: secret, MinimumProtocolVersion: []string{"", "1.1", "1.2", "1.3"}[port&3]}
	}
	vertex := &ingressroutev1.IngressRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "vertex"},
		Spec: ingressroutev1.IngressRouteSpec{
			Strategy:    type1,
			HealthCheck: &ingressroutev1.HealthCheck{Path: path1, Host: host1, IntervalSeconds: int64(port % 7), TimeoutSeconds: int64(port % 3)},
			Routes: []ingressroutev1.Route{
				{Match: path2, Service: ingressroutev1.ServiceList{{Name: svc, Port: port, Weight: &weight}}, PermitInsecure: true},
				{Match: path2 + path1, Delegate: &ingressroutev1.Delegate{Name: portName}},
			},
		},
	}
	return []runtime.Object{root, vertex}
}

// checkStatuses checks that every routing object has exactly one status, and that only
// valid IngressRoutes have routes in the graph.
func checkStatuses(t *testing.T, s *store.Store, opts dag.Options, g *dag.Graph) {
	t.Helper()
	want := len(s.IngressRoutes) + len(s.HTTPProxies)
	if !opts.DisableIngress {
		want += len(s.Ingresses)
	}
	statuses := map[dag.ObjectRef]*dag.Status{}
	for _, st := range g.Statuses {
		if _, dup := statuses[st.Object]; dup {
			t.Fatalf("two statuses for %s: %+v", st.Object, g.Statuses)
		}
		statuses[st.Object] = st
	}
	if len(statuses) != want {
		t.Fatalf("got %d statuses, want one for each of %d objects: %+v", len(statuses), want, g.Statuses)
	}
	check := func(vh *dag.VirtualHost) {
		for _, r := range vh.Routes {
			if (r.Source.Kind == dag.KindIngressRoute || r.Source.Kind == dag.KindHTTPProxy) && statuses[r.Source].Status != dag.StatusValid {
				t.Fatalf("host %s route %q comes from %s, which is %s: %s", vh.Name, r.Path.Value, r.Source, statuses[r.Source].Status, statuses[r.Source].Description)
			}
			if (r.HTTPSRedirect || r.DirectStatus != 0) && len(r.Clusters) > 0 {
				t.Fatalf("host %s route %q answers itself but has clusters", vh.Name, r.Path.Value)
			}
			if !r.HTTPSRedirect && r.DirectStatus == 0 && r.Redirect == nil && len(r.Clusters) == 0 {
				t.Fatalf("host %s route %q has nothing to do", vh.Name, r.Path.Value)
			}
		}
	}
	for _, vh := range g.HTTP {
		check(vh)
	}
	for _, svh := range g.HTTPS {
		check(&svh.VirtualHost)
	}
}

// fuzzHTTPProxies makes a root (default/proxy, for host1) with conditions, policies and
// an include of a child (team/child) out of the fuzzer's strings.
func fuzzHTTPProxies(host1, path1, type1, svc string, port int32, portName, host2, path2, type2, secret string) []runtime.Object {
	protocol := []string{"", "h2", "h2c", "tls", type1}[int(port&0x7fffffff)%5]
	root := &contourv1.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "proxy"},
		Spec: contourv1.HTTPProxySpec{
			VirtualHost: &contourv1.VirtualHost{Fqdn: host1},
			Routes: []contourv1.Route{
				{
					Conditions:         []contourv1.MatchCondition{{Prefix: path1}, {Header: &contourv1.HeaderMatchCondition{Name: type1, Regex: portName}}},
					Services:           []contourv1.Service{{Name: svc, Port: int(port), Protocol: &protocol, RequestHeadersPolicy: &contourv1.HeadersPolicy{Set: []contourv1.HeaderValue{{Name: type1, Value: portName}}}}},
					PermitInsecure:     port%2 == 0,
					TimeoutPolicy:      &contourv1.TimeoutPolicy{Response: type2, Idle: portName},
					PathRewritePolicy:  &contourv1.PathRewritePolicy{ReplacePrefix: []contourv1.ReplacePrefix{{Prefix: path1, Replacement: path2}}},
					LoadBalancerPolicy: &contourv1.LoadBalancerPolicy{Strategy: type1, RequestHashPolicies: []contourv1.RequestHashPolicy{{HeaderHashOptions: &contourv1.HeaderHashOptions{HeaderName: portName}}}},
				},
				{
					Conditions:    []contourv1.MatchCondition{{Regex: path2}, {QueryParameter: &contourv1.QueryParameterMatchCondition{Name: type1, Contains: type2}}, {Cookie: type2}},
					Services:      []contourv1.Service{{Name: svc, Port: int(port)}},
					FailurePolicy: &contourv1.FailurePolicy{PerTryTimeout: type2, Interval: portName},
				},
			},
			Includes: []contourv1.Include{{Name: "child", Namespace: "team", Conditions: []contourv1.MatchCondition{{Prefix: path2}, {UserAgent: type2}}, PermitInsecure: port%3 == 0}},
		},
	}
	if secret != "" {
		root.Spec.VirtualHost.TLS = &contourv1.TLS{SecretName: secret, MinimumProtocolVersion: []string{"", "1.2", "1.3", type2}[port&3]}
	}
	child := &contourv1.HTTPProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "child"},
		Spec: contourv1.HTTPProxySpec{
			Routes: []contourv1.Route{{
				Conditions:            []contourv1.MatchCondition{{Prefix: path1}, {Header: &contourv1.HeaderMatchCondition{Name: portName, NotContains: host2}}},
				Services:              []contourv1.Service{{Name: svc, Port: int(port), Weight: int64(port)}},
				ResponseHeadersPolicy: &contourv1.HeadersPolicy{Set: []contourv1.HeaderValue{{Name: portName, Value: host2}}, Remove: []string{type1}},
				PermitInsecure:        true,
			}},
			Includes: []contourv1.Include{{Name: portName, Conditions: []contourv1.MatchCondition{{Prefix: path1 + path2}}}},
		},
	}
	return []runtime.Object{root, child}
}
