package manifest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	contourv1beta1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

func proxy(ns, name string, spec contourv1.HTTPProxySpec) *contourv1.HTTPProxy {
	return &contourv1.HTTPProxy{TypeMeta: tm("projectcontour.io/v1", "HTTPProxy"), ObjectMeta: om(ns, name), Spec: spec}
}

func proxySvc(name string, port int) contourv1.Service {
	return contourv1.Service{Name: name, Port: port}
}

func TestDecodeHTTPProxies(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		input string
		want  []runtime.Object
		probs []Problem
	}{
		{
			name: "a root with TLS, includes with conditions, routes with policies",
			file: "root.yaml",
			input: `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata:
  name: root
  namespace: web
spec:
  ingressClassName: portico
  virtualhost:
    fqdn: app.example.com
    tls:
      secretName: certs/wildcard
      minimumProtocolVersion: "1.2"
      clientValidation: {caSecret: client-ca, optionalClientCertificate: true}
    corsPolicy:
      allowOrigin: ["*"]
      allowMethods: [GET, POST]
      maxAge: 10m
  includes:
  - name: blog
    namespace: marketing
    conditions:
    - prefix: /blog
    - header: {name: x-team, present: true}
  - name: api
    permitInsecure: true
    conditions: [{prefix: /api}]
  routes:
  - conditions:
    - prefix: /
    - queryParameter: {name: debug, exact: "1", ignoreCase: true}
    services:
    - {name: web, port: 80, weight: 90}
    - {name: canary, port: 8443, weight: 10, protocol: tls, validation: {caSecret: ca, subjectName: canary.web}}
    - {name: shadow, port: 80, mirror: true}
    enableWebsockets: true
    timeoutPolicy: {response: 1s, idle: infinity, idleConnection: 1h}
    retryPolicy: {count: 3, perTryTimeout: 150ms, retryOn: [5xx, retriable-status-codes], retriableStatusCodes: [503]}
    healthCheckPolicy: {path: /healthz, intervalSeconds: 5, expectedStatuses: [{start: 200, end: 300}]}
    loadBalancerPolicy:
      strategy: RequestHash
      requestHashPolicies: [{headerHashOptions: {headerName: x-user}, terminal: true}, {hashSourceIP: true}]
    pathRewritePolicy: {replacePrefix: [{prefix: /, replacement: /app}]}
    requestHeadersPolicy: {set: [{name: x-from, value: portico}], remove: [x-internal]}
  - conditions: [{exact: /old}]
    requestRedirectPolicy: {scheme: https, statusCode: 301, path: /new}
  - conditions: [{regex: "/teapot/.*"}]
    directResponsePolicy: {statusCode: 418, body: short and stout}
`,
			want: []runtime.Object{proxy("web", "root", contourv1.HTTPProxySpec{
				IngressClassName: "portico",
				VirtualHost: &contourv1.VirtualHost{
					Fqdn: "app.example.com",
					TLS: &contourv1.TLS{
						SecretName: "certs/wildcard", MinimumProtocolVersion: "1.2",
						ClientValidation: &contourv1.DownstreamValidation{CACertificate: "client-ca", OptionalClientCertificate: true},
					},
					CORSPolicy: &contourv1.CORSPolicy{AllowOrigin: []string{"*"}, AllowMethods: []contourv1.CORSHeaderValue{"GET", "POST"}, MaxAge: "10m"},
				},
				Includes: []contourv1.Include{
					{Name: "blog", Namespace: "marketing", Conditions: []contourv1.MatchCondition{
						{Prefix: "/blog"}, {Header: &contourv1.HeaderMatchCondition{Name: "x-team", Present: true}},
					}},
					{Name: "api", PermitInsecure: true, Conditions: []contourv1.MatchCondition{{Prefix: "/api"}}},
				},
				Routes: []contourv1.Route{
					{
						Conditions: []contourv1.MatchCondition{
							{Prefix: "/"},
							{QueryParameter: &contourv1.QueryParameterMatchCondition{Name: "debug", Exact: "1", IgnoreCase: true}},
						},
						Services: []contourv1.Service{
							{Name: "web", Port: 80, Weight: 90},
							{Name: "canary", Port: 8443, Weight: 10, Protocol: ptr("tls"), UpstreamValidation: &contourv1.UpstreamValidation{CACertificate: "ca", SubjectName: "canary.web"}},
							{Name: "shadow", Port: 80, Mirror: true},
						},
						EnableWebsockets: true,
						TimeoutPolicy:    &contourv1.TimeoutPolicy{Response: "1s", Idle: "infinity", IdleConnection: "1h"},
						RetryPolicy: &contourv1.RetryPolicy{
							NumRetries: 3, PerTryTimeout: "150ms",
							RetryOn: []contourv1.RetryOn{"5xx", "retriable-status-codes"}, RetriableStatusCodes: []uint32{503},
						},
						HealthCheckPolicy: &contourv1.HTTPHealthCheckPolicy{Path: "/healthz", IntervalSeconds: 5, ExpectedStatuses: []contourv1.StatusRange{{Start: 200, End: 300}}},
						LoadBalancerPolicy: &contourv1.LoadBalancerPolicy{Strategy: "RequestHash", RequestHashPolicies: []contourv1.RequestHashPolicy{
							{HeaderHashOptions: &contourv1.HeaderHashOptions{HeaderName: "x-user"}, Terminal: true}, {HashSourceIP: true},
						}},
						PathRewritePolicy:    &contourv1.PathRewritePolicy{ReplacePrefix: []contourv1.ReplacePrefix{{Prefix: "/", Replacement: "/app"}}},
						RequestHeadersPolicy: &contourv1.HeadersPolicy{Set: []contourv1.HeaderValue{{Name: "x-from", Value: "portico"}}, Remove: []string{"x-internal"}},
					},
					{
						Conditions:            []contourv1.MatchCondition{{Exact: "/old"}},
						RequestRedirectPolicy: &contourv1.HTTPRequestRedirectPolicy{Scheme: ptr("https"), StatusCode: ptr(301), Path: ptr("/new")},
					},
					{
						Conditions:           []contourv1.MatchCondition{{Regex: "/teapot/.*"}},
						DirectResponsePolicy: &contourv1.HTTPDirectResponsePolicy{StatusCode: 418, Body: "short and stout"},
					},
				},
			})},
		},
		{
			name: "TLS passthrough to a tcpproxy, and a tcpproxy included under both spellings",
			file: "tcp.yaml",
			input: `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: passthrough}
spec:
  virtualhost: {fqdn: db.example.com, tls: {passthrough: true}}
  tcpproxy:
    loadBalancerPolicy: {strategy: Random}
    services: [{name: db, port: 5432}]
    healthCheckPolicy: {intervalSeconds: 10, unhealthyThresholdCount: 3}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: include}
spec:
  virtualhost: {fqdn: tcp.example.com, tls: {secretName: tcp}}
  tcpproxy: {include: {name: backend, namespace: tcp}}
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: includes}
spec:
  virtualhost: {fqdn: old.example.com, tls: {secretName: tcp}}
  tcpproxy: {includes: {name: backend}}
`,
			want: []runtime.Object{
				proxy("default", "passthrough", contourv1.HTTPProxySpec{
					VirtualHost: &contourv1.VirtualHost{Fqdn: "db.example.com", TLS: &contourv1.TLS{Passthrough: true}},
					TCPProxy: &contourv1.TCPProxy{
						LoadBalancerPolicy: &contourv1.LoadBalancerPolicy{Strategy: "Random"},
						Services:           []contourv1.Service{proxySvc("db", 5432)},
						HealthCheckPolicy:  &contourv1.TCPHealthCheckPolicy{IntervalSeconds: 10, UnhealthyThresholdCount: 3},
					},
				}),
				proxy("default", "include", contourv1.HTTPProxySpec{
					VirtualHost: &contourv1.VirtualHost{Fqdn: "tcp.example.com", TLS: &contourv1.TLS{SecretName: "tcp"}},
					TCPProxy:    &contourv1.TCPProxy{Include: &contourv1.TCPProxyInclude{Name: "backend", Namespace: "tcp"}},
				}),
				proxy("default", "includes", contourv1.HTTPProxySpec{
					VirtualHost: &contourv1.VirtualHost{Fqdn: "old.example.com", TLS: &contourv1.TLS{SecretName: "tcp"}},
					TCPProxy:    &contourv1.TCPProxy{IncludesDeprecated: &contourv1.TCPProxyInclude{Name: "backend"}},
				}),
			},
		},
		{
			name: "seed 004's additions: cookie and userAgent conditions, failurePolicy, httpVersions",
			file: "seed004.yaml",
			input: `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: failures, namespace: team}
spec:
  httpVersions: [HTTP/1.1]
  routes:
  - conditions: [{prefix: /foo}, {cookie: user=test}, {userAgent: Chrome}]
    services: [{name: s, port: 80}]
    failurePolicy:
      count: 3
      perTryTimeout: 150ms
      retryOn: [gateway-error]
      retryPolicyEnabled: false
      passiveHealthCheckEnabled: true
      consecutive5xx: 2
      interval: 5s
      baseEjectionTime: 1m
      maxEjectionPercent: 0
  - conditions: [{prefix: /defaults}]
    services: [{name: s, port: 80}]
    failurePolicy: {}
`,
			want: []runtime.Object{proxy("team", "failures", contourv1.HTTPProxySpec{
				HTTPVersions: []contourv1.HTTPVersionType{contourv1.HTTPVersion1},
				Routes: []contourv1.Route{
					{
						Conditions: []contourv1.MatchCondition{{Prefix: "/foo"}, {Cookie: "user=test"}, {UserAgent: "Chrome"}},
						Services:   []contourv1.Service{proxySvc("s", 80)},
						FailurePolicy: &contourv1.FailurePolicy{
							Count: ptr(int64(3)), PerTryTimeout: "150ms", RetryOn: []contourv1.RetryOn{"gateway-error"},
							RetryPolicyEnabled: ptr(false), PassiveHealthCheckEnabled: ptr(true),
							Consecutive5xx: ptr(int64(2)), Interval: "5s", BaseEjectionTime: "1m", MaxEjectionPercent: ptr(int64(0)),
						},
					},
					{
						// Unset differs from zero: every field is nil, for the defaults.
						Conditions:    []contourv1.MatchCondition{{Prefix: "/defaults"}},
						Services:      []contourv1.Service{proxySvc("s", 80)},
						FailurePolicy: &contourv1.FailurePolicy{},
					},
				},
			})},
		},
		{
			name: "projectcontour.io TLSCertificateDelegation beside contour.heptio.com's of the same name, and an HTTPProxyList",
			file: "delegation.json",
			input: `{"apiVersion": "projectcontour.io/v1", "kind": "TLSCertificateDelegation",
 "metadata": {"name": "wildcard", "namespace": "certs"},
 "spec": {"delegations": [{"secretName": "wildcard", "targetNamespaces": ["*"]}]}}
{"apiVersion": "contour.heptio.com/v1beta1", "kind": "TLSCertificateDelegation",
 "metadata": {"name": "wildcard", "namespace": "certs"},
 "spec": {"delegations": [{"secretName": "wildcard", "targetNamespaces": ["web"]}]}}
{"apiVersion": "projectcontour.io/v1", "kind": "HTTPProxyList",
 "items": [{"metadata": {"name": "listed"}, "spec": {"routes": [{"services": [{"name": "s", "port": 80}]}]}}]}
`,
			want: []runtime.Object{
				&contourv1.TLSCertificateDelegation{
					TypeMeta: tm("projectcontour.io/v1", "TLSCertificateDelegation"), ObjectMeta: om("certs", "wildcard"),
					Spec: contourv1.TLSCertificateDelegationSpec{Delegations: []contourv1.CertificateDelegation{
						{SecretName: "wildcard", TargetNamespaces: []string{"*"}},
					}},
				},
				&contourv1beta1.TLSCertificateDelegation{
					TypeMeta: tm("contour.heptio.com/v1beta1", "TLSCertificateDelegation"), ObjectMeta: om("certs", "wildcard"),
					Spec: contourv1beta1.TLSCertificateDelegationSpec{Delegations: []contourv1beta1.CertificateDelegation{
						{SecretName: "wildcard", TargetNamespaces: []string{"web"}},
					}},
				},
				proxy("default", "listed", contourv1.HTTPProxySpec{Routes: []contourv1.Route{
					{Services: []contourv1.Service{proxySvc("s", 80)}},
				}}),
			},
		},
		{
			name: "malformed HTTPProxies are reported at the offending field; the others are kept",
			file: "typos.yaml",
			input: `apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: unknown-field}
spec:
  routes:
  - conditions: [{prefix: /}]
    services: [{name: s, prot: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: wrong-type}
spec:
  routes:
  - services: [{name: s, port: "80"}]
---
# the IngressRoute spelling of a route, in an HTTPProxy
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: ingressroute-spelling}
spec:
  routes:
  - match: /
    services: [{name: s, port: 80}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: in-condition}
spec:
  includes: [{name: x, conditions: [{header: {name: x, exists: true}}]}]
---
apiVersion: projectcontour.io/v1
kind: TLSCertificateDelegation
metadata: {name: d}
spec:
  delegations: [{secretName: s, targetNamespace: ["*"]}]
---
apiVersion: projectcontour.io/v1
kind: HTTPProxy
metadata: {name: good}
spec:
  routes: [{services: [{name: s, port: 80}]}]
`,
			want: []runtime.Object{proxy("default", "good", contourv1.HTTPProxySpec{Routes: []contourv1.Route{
				{Services: []contourv1.Service{proxySvc("s", 80)}},
			}})},
			probs: []Problem{
				{File: "typos.yaml", Line: 7, Document: 1, Reason: `unknown field "spec.routes[0].services[0].prot"`},
				{File: "typos.yaml", Line: 14, Document: 2, Reason: `field "spec.routes[0].services[0].port" must be an integer, not a string`},
				{File: "typos.yaml", Line: 22, Document: 3, Reason: `unknown field "spec.routes[0].match"`},
				{File: "typos.yaml", Line: 29, Document: 4, Reason: `unknown field "spec.includes[0].conditions[0].header.exists"`},
				{File: "typos.yaml", Line: 35, Document: 5, Reason: `unknown field "spec.delegations[0].targetNamespace"`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, probs := Decode(tc.file, []byte(tc.input))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.probs, probs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
