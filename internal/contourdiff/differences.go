// Package contourdiff is the one list of the behaviours in which Portico and Contour
// (v1.33, the release whose HTTPProxy Portico implements) differ where a Contour user
// can tell, and the check that finds, in a directory of Contour manifests, the fields
// that would behave differently (`portico check --contour`). docs/contour.md's table
// is this list (TestDocsTable).
package contourdiff

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	"github.com/portico-dev/portico/internal/dag"
)

// Status says whether a difference remains.
type Status string

const (
	// Deliberate differences are Portico's choice and stay; the check reports them.
	Deliberate Status = "differs"
	// Same rows are behaviours that once differed and now are Contour's: the table
	// keeps them for those who knew the old ones.
	Same Status = "same as Contour"
)

// Difference is one behaviour. Field is where a manifest asks for it ("" for what
// holds for every object).
type Difference struct {
	ID      string
	Field   string
	Contour string
	Portico string
	Do      string
	Status  Status
	// proxy and service return the fields of an object that ask for the behaviour.
	proxy   func(p *contourv1.HTTPProxy, in *Objects) []string
	service func(s *corev1.Service) []string
}

// Differences is the list, in the order of docs/contour.md's table.
var Differences = []Difference{
	{ID: "include-seals", Field: "spec.includes[]", Status: Deliberate,
		Contour: "a request that matches an include's conditions but none of the included routes falls through to the other routes of the host",
		Portico: "the include seals its conditions: such a request gets 404, never another team's route",
		Do:      "give the included object a route for every path it must serve (a route without conditions catches the rest)",
		proxy: func(p *contourv1.HTTPProxy, _ *Objects) []string {
			return indexed("spec.includes", len(p.Spec.Includes))
		}},
	{ID: "segment-prefix", Field: "conditions[].prefix", Status: Deliberate,
		Contour: "a prefix is a string prefix: /api matches /api, /api/x and /apix",
		Portico: "a prefix matches whole segments: /api matches /api and /api/x, not /apix; a prefix ending in / is a string prefix",
		Do:      "nothing if /api must not serve /apix; to keep /apix, use regex: /api.*",
		proxy:   segmentPrefixes},
	{ID: "included-permit-insecure", Field: "spec.routes[].permitInsecure", Status: Deliberate,
		Contour: "a route of an included HTTPProxy with permitInsecure: true is served over plain HTTP",
		Portico: "it is served over plain HTTP only when every include on its way from the root sets permitInsecure: true; otherwise it is redirected to HTTPS, with a status warning",
		Do:      "set permitInsecure: true on the includes that lead to it (the root's owner decides)",
		proxy: func(p *contourv1.HTTPProxy, _ *Objects) []string {
			if p.Spec.VirtualHost != nil {
				return nil
			}
			var out []string
			for i, r := range p.Spec.Routes {
				if r.PermitInsecure {
					out = append(out, fmt.Sprintf("spec.routes[%d].permitInsecure", i))
				}
			}
			return out
		}},
	{ID: "authorization-route-cache", Field: "spec.virtualhost.authorization", Status: Deliberate,
		Contour: "headers the authorization server adds can select another route (Envoy's clear_route_cache)",
		Portico: "the route is chosen before the check and kept: route conditions see the client's headers as they arrived",
		Do:      "do not route on headers the authorization server sets (Auth-Username, ...); route on the client's own",
		proxy: hostAuthorization("spec.virtualhost.authorization", func(a *contourv1.AuthorizationServer) bool {
			return a.ExtensionServiceRef.Name != ""
		})},
	{ID: "authorization-fail-open", Field: "spec.virtualhost.authorization.failOpen", Status: Deliberate,
		Contour: "a request let through because the server failed reaches the backend as any other",
		Portico: "it carries x-envoy-auth-failure-mode-allowed: true to the backend",
		Do:      "nothing, or have the backend treat that header as unauthenticated",
		proxy: hostAuthorization("spec.virtualhost.authorization.failOpen", func(a *contourv1.AuthorizationServer) bool {
			return a.FailOpen
		})},
	{ID: "global-authorization", Field: "spec.virtualhost.authorization", Status: Deliberate,
		Contour: "an authorization without extensionRef that does not disable checking uses the global server (globalExtAuth); without one, the host is served unchecked",
		Portico: "it uses the global server (--global-ext-auth, globalExtAuth in --config); without one the HTTPProxy is invalid (ExtensionServiceRefMissing) rather than served unchecked",
		Do:      "configure globalExtAuth, or name the host's own extensionRef",
		proxy: hostAuthorization("spec.virtualhost.authorization", func(a *contourv1.AuthorizationServer) bool {
			return a.ExtensionServiceRef.Name == "" && (a.AuthPolicy == nil || !a.AuthPolicy.Disabled)
		})},
	{ID: "validation-clear-text", Field: "spec.routes[].services[].validation", Status: Deliberate,
		Contour: "on a Service port that is not TLS (no protocol, no projectcontour.io/upstream-protocol.tls annotation), validation is ignored and the backend is reached in clear text",
		Portico: "the HTTPProxy is invalid (ValidationInvalid): what you asked to verify is never sent in clear",
		Do:      "set protocol: tls (or h2) on the service, or annotate the Service port projectcontour.io/upstream-protocol.tls",
		proxy: func(p *contourv1.HTTPProxy, in *Objects) []string {
			return serviceFields(p, "validation", func(s contourv1.Service) bool {
				return s.UpstreamValidation != nil && s.Protocol == nil && !in.tlsPort(p.Namespace, s.Name, s.Port)
			})
		}},
	{ID: "ingress-class", Field: "spec.ingressClassName", Status: Deliberate,
		Contour: "Contour's default class is contour",
		Portico: "Portico's default class is portico: an object naming another class is ignored (status ignored); an object naming none is served by both",
		Do:      "start Portico with --ingress-class-name set to the object's class, or change the object's class",
		proxy: func(p *contourv1.HTTPProxy, _ *Objects) []string {
			if p.Spec.IngressClassName != "" {
				return []string{"spec.ingressClassName"}
			}
			for _, a := range classAnnotations {
				if _, ok := p.Annotations[a]; ok {
					return []string{"metadata.annotations[" + a + "]"}
				}
			}
			return nil
		}},
	{ID: "circuit-breakers", Field: "Service metadata.annotations[projectcontour.io/max-*]", Status: Same,
		Contour: "projectcontour.io/max-connections, max-pending-requests, max-requests, max-retries and per-host-max-connections set the Service's circuit breakers",
		Portico: "the same, in both data planes: over max-requests or max-pending-requests a request gets 503 with x-envoy-overloaded: true"},
	{ID: "upstream-protocol-ingress", Field: "Service metadata.annotations[projectcontour.io/upstream-protocol.*]", Status: Same,
		Contour: "every route to the Service port speaks that protocol: HTTPProxy routes and tcpproxy, Ingress backends",
		Portico: "the same (an HTTPProxy service's protocol field wins)"},
	{ID: "missing-service", Status: Deliberate,
		Contour: "a route to a Service that does not exist makes the HTTPProxy invalid; its other routes are still served and that route answers 503",
		Portico: "the same routing, but the HTTPProxy stays valid with a warning (ServiceUnresolved)",
		Do:      "watch warnings as well as invalid objects (portico check lists both)"},
	{ID: "server-header", Status: Deliberate,
		Contour: "responses carry server: envoy",
		Portico: "responses carry server: portico",
		Do:      "--server-header-transformation pass_through or append_if_absent, or a route's responseHeadersPolicy"},
	{ID: "compression", Status: Same,
		Contour: "responses are compressed with gzip by default (compression.algorithm: brotli, zstd or disabled)",
		Portico: "the same, in both data planes: gzip by default; --compression or compression.algorithm in --config picks brotli, zstd or disabled (before issue 21, nothing was compressed)"},
	{ID: "header-absent", Status: Same,
		Contour: "notexact and notcontains do not hold on a request without the header (Envoy's invert_match)",
		Portico: "the same, in both data planes; treatMissingAsEmpty: true makes them hold"},
	{ID: "panic-mode", Status: Same,
		Contour: "with a healthCheckPolicy, a route whose endpoints all fail their checks answers 503",
		Portico: "the same (panic mode off on health-checked clusters); without a health check, Envoy's 50% panic threshold"},
	{ID: "dynamic-headers", Status: Same,
		Contour: "header values and Host rewrites may use %REQ(X-Header)%, %CONTOUR_NAMESPACE%, %CONTOUR_SERVICE_NAME%, %CONTOUR_SERVICE_PORT%",
		Portico: "the same, with every Envoy variable Contour documents, in both data planes; Host: %REQ(x-header)% on a route rewrites the Host from that header (the embedded proxy gives an empty %DOWNSTREAM_TLS_SESSION_ID%)"},
	{ID: "grpc-web", Status: Same,
		Contour: "a gRPC-Web request to a gRPC backend works (the grpc_web filter)",
		Portico: "the same, in both data planes (the embedded proxy does not turn a backend's non-gRPC page into grpc-message; Envoy does)"},
	{ID: "merge-slashes", Status: Same,
		Contour: "//a//b is routed and forwarded as /a/b unless disableMergeSlashes",
		Portico: "the same; --disable-merge-slashes keeps them"},
	{ID: "ingress-class-list", Status: Same,
		Contour: "--ingress-class-name takes a comma-separated list (contour,team1)",
		Portico: "the same, in run, serve and check, and ingress.classNames in --config"},
	{ID: "strict-validation", Status: Same,
		Contour: "bad cookieRewritePolicies, internalRedirectPolicy enums, subjectNames[0] not equal to subjectName make the object invalid",
		Portico: "the same, in the status, the admission webhook and the CRD schema; so are Contour's conflicting conditions (exact twice on one header, present with notpresent)"},
	{ID: "global-ext-auth", Status: Same,
		Contour: "globalExtAuth authorizes every host without a server of its own, over HTTP and HTTPS; authPolicy.disabled takes a host or a route out",
		Portico: "the same, in both data planes (--global-ext-auth, or globalExtAuth in --config)"},
	{ID: "upstream-tls-maximum", Status: Same,
		Contour: "TLS to backends (protocol tls or h2) goes up to TLS 1.3",
		Portico: "the same, in both data planes (before issue 21, up to TLS 1.2: Envoy's client default)"},
	{ID: "http10", Status: Same,
		Contour: "HTTP/1.0 requests with a Host are served",
		Portico: "the same, in both data planes (before issue 21 Envoy answered them 426)"},
	{ID: "grpc-local-replies", Status: Same,
		Contour: "a gRPC client gets the proxy's own answers (no route, no healthy upstream, a rate limit) as grpc-status and grpc-message; enableResourceExhaustedCode makes a limit RESOURCE_EXHAUSTED",
		Portico: "the same, in both data planes (--rate-limit-resource-exhausted)"},
	{ID: "connection-timeouts", Status: Same,
		Contour: "idle client connections close after 60s; timeouts.* set the connection idle, maximum duration, drain, delayed close and request timeouts",
		Portico: "the same, in both data planes (--connection-idle-timeout and its neighbours)"},
	{ID: "proxy-protocol", Status: Same,
		Contour: "contour serve --use-proxy-protocol (useProxyProtocol) reads the PROXY protocol header of a TCP load balancer: the client's address is the header's",
		Portico: "the same, in both data planes (--use-proxy-protocol)"},
	{ID: "request-id", Status: Deliberate,
		Contour: "a client's X-Request-Id is kept and sent to the backend",
		Portico: "every request gets a new X-Request-Id at the edge, so a client cannot choose the id your logs correlate on",
		Do:      "send a correlation id of your own in another header"},
	{ID: "upstream-protocol-annotation", Status: Same,
		Contour: "an HTTPProxy service without protocol speaks what the Service's projectcontour.io/upstream-protocol.h2, h2c or tls annotation gives its port",
		Portico: "the same for HTTPProxy routes (see the Service annotation row for the rest)"},
}

var classAnnotations = []string{"kubernetes.io/ingress.class", "projectcontour.io/ingress.class", "contour.heptio.com/ingress.class"}

// Objects are the objects checked together: a field's behaviour may depend on another
// object (a Service's annotation).
type Objects struct {
	services map[[2]string]*corev1.Service
}

// NewObjects indexes objs.
func NewObjects(objs []runtime.Object) *Objects {
	in := &Objects{services: map[[2]string]*corev1.Service{}}
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok {
			in.services[[2]string{s.Namespace, s.Name}] = s
		}
	}
	return in
}

// tlsPort says whether Service namespace/name is among the objects with port annotated
// for TLS (projectcontour.io/upstream-protocol.tls or .h2), as the dag reads the
// annotations.
func (in *Objects) tlsPort(namespace, name string, port int) bool {
	s := in.services[[2]string{namespace, name}]
	if s == nil {
		return false
	}
	p := dag.AnnotatedProtocol(s, networkingv1.ServiceBackendPort{Number: int32(port)})
	return p == "tls" || p == "h2"
}

// hostAuthorization finds field in a root whose spec.virtualhost.authorization asks
// for the behaviour (holds).
func hostAuthorization(field string, holds func(*contourv1.AuthorizationServer) bool) func(*contourv1.HTTPProxy, *Objects) []string {
	return func(p *contourv1.HTTPProxy, _ *Objects) []string {
		if vh := p.Spec.VirtualHost; vh != nil && vh.Authorization != nil && holds(vh.Authorization) {
			return []string{field}
		}
		return nil
	}
}

func indexed(field string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s[%d]", field, i)
	}
	return out
}

// segmentPrefixes are the prefix conditions that match differently: not "/", not
// ending in "/".
func segmentPrefixes(p *contourv1.HTTPProxy, _ *Objects) []string {
	var out []string
	check := func(at string, conds []contourv1.MatchCondition) {
		for j, c := range conds {
			if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
				out = append(out, fmt.Sprintf("%s.conditions[%d].prefix", at, j))
			}
		}
	}
	for i, inc := range p.Spec.Includes {
		check(fmt.Sprintf("spec.includes[%d]", i), inc.Conditions)
	}
	for i, r := range p.Spec.Routes {
		check(fmt.Sprintf("spec.routes[%d]", i), r.Conditions)
	}
	return out
}

func serviceFields(p *contourv1.HTTPProxy, name string, match func(contourv1.Service) bool) []string {
	var out []string
	for i, r := range p.Spec.Routes {
		for j, s := range r.Services {
			if match(s) {
				out = append(out, fmt.Sprintf("spec.routes[%d].services[%d].%s", i, j, name))
			}
		}
	}
	return out
}
