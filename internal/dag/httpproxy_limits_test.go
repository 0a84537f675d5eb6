package dag

import (
	"strings"
	"testing"

	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
)

// TestContourSchemaLimits: what the HTTPProxy and ExtensionService CRDs' schemas refuse
// (lengths, patterns, enums, list sizes, the subjectNames rule) an object in a directory
// is refused for too, with the build's status and ValidateObject (the webhook, `portico
// check`) saying the same thing.
func TestContourSchemaLimits(t *testing.T) {
	route := func(r string) string {
		return `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: p.example.com}, routes: [` + r + `]}}`
	}
	service := func(s string) string { return route(`{services: [{name: s, port: 80, ` + s + `}]}`) }
	vhost := func(v string) string {
		return `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: p.example.com, ` + v + `}, routes: [{services: [{name: s, port: 80}]}]}}`
	}
	jwks := func(validation string) string {
		return vhost(`tls: {secretName: cert}, jwtProviders: [{name: p, remoteJWKS: {uri: "https://idp.example.com/keys", validation: ` + validation + `}}]`)
	}
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, tc := range []struct {
		name, doc, typ, reason, want string
	}{
		{"cookie name over 4096", route(`{services: [{name: s, port: 80}], cookieRewritePolicies: [{name: ` + long(4097) + `, secure: true}]}`),
			problemRoute, "CookieRewriteInvalid", "cookieRewritePolicies[0].name is 4097 characters long, over the limit of 4096"},
		{"cookie path over 4096", route(`{services: [{name: s, port: 80}], cookieRewritePolicies: [{name: a, pathRewrite: {value: /` + long(4096) + `}}]}`),
			problemRoute, "CookieRewriteInvalid", "cookieRewritePolicies[0].pathRewrite.value is 4097 characters long"},
		{"cookie domain with capitals", route(`{services: [{name: s, port: 80}], cookieRewritePolicies: [{name: a, domainRewrite: {value: Example.com}}]}`),
			problemRoute, "CookieRewriteInvalid", `domainRewrite.value "Example.com" must be a domain name in lower case`},
		{"cookie domain with an underscore", service(`cookieRewritePolicies: [{name: a, domainRewrite: {value: a_b.example.com}}]`),
			problemRoute, "CookieRewriteInvalid", `services[0].cookieRewritePolicies[0].domainRewrite.value "a_b.example.com" must be a domain name`},
		{"redirect hostname with capitals", route(`{requestRedirectPolicy: {hostname: Example.com}}`),
			problemRoute, "RedirectInvalid", `requestRedirectPolicy.hostname "Example.com" must be written in lower case`},
		{"retry count below -1", route(`{services: [{name: s, port: 80}], retryPolicy: {count: -2}}`),
			problemRoute, "RetryPolicyInvalid", "retryPolicy.count -2 must be -1 (no retries) or more"},
		{"CORS allowHeaders empty", vhost(`corsPolicy: {allowOrigin: ["*"], allowMethods: [GET], allowHeaders: []}`),
			problemCORS, "HeaderValueInvalid", "corsPolicy.allowHeaders is empty"},
		{"CORS exposeHeaders empty", vhost(`corsPolicy: {allowOrigin: ["*"], allowMethods: [GET], exposeHeaders: []}`),
			problemCORS, "HeaderValueInvalid", "corsPolicy.exposeHeaders is empty"},
		{"route header set to nothing", route(`{services: [{name: s, port: 80}], requestHeadersPolicy: {set: [{name: x-a, value: ""}]}}`),
			problemRoute, "HeaderValueEmpty", "spec.routes[0].requestHeadersPolicy.set[0].value is empty"},
		{"service header set to nothing", service(`responseHeadersPolicy: {set: [{name: x-a, value: ""}]}`),
			problemRoute, "HeaderValueEmpty", "spec.routes[0].services[0].responseHeadersPolicy.set[0].value is empty"},
		{"local rate limit header set to nothing", route(`{services: [{name: s, port: 80}], rateLimitPolicy: {local: {requests: 1, unit: second, responseHeadersToAdd: [{name: x-a, value: ""}]}}}`),
			problemSpec, "RateLimitPolicyInvalid", "responseHeadersToAdd[0].value must be non-empty"},
		{"protocol empty", service(`protocol: ""`),
			problemService, "ProtocolInvalid", `services[0].protocol "" must be one of h2, h2c, tls`},
		{"tcpproxy protocol empty", `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: p.example.com, tls: {passthrough: true}}, tcpproxy: {services: [{name: s, port: 80, protocol: ""}]}}}`,
			problemTCPProxy, "ProtocolInvalid", "spec.tcpproxy.services[0].protocol: a TCP proxy forwards bytes"},
		{"subjectNames without subjectName", service(`protocol: tls, validation: {caSecret: ca, subjectNames: [a.example.com]}`),
			problemService, "ValidationInvalid", "services[0].validation.subjectName is required"},
		{"subjectNames[0] is not subjectName", service(`protocol: tls, validation: {caSecret: ca, subjectName: a.example.com, subjectNames: [b.example.com, a.example.com]}`),
			problemService, "ValidationInvalid", `validation.subjectNames[0] "b.example.com" must equal subjectName "a.example.com"`},
		{"nine subjectNames", service(`protocol: tls, validation: {caSecret: ca, subjectName: a, subjectNames: [a, b, c, d, e, f, g, h, i]}`),
			problemService, "ValidationInvalid", "validation.subjectNames has 9 names, over the limit of 8"},
		{"subjectNames empty", service(`protocol: h2, validation: {caSecret: ca, subjectName: a, subjectNames: []}`),
			problemService, "ValidationInvalid", "validation.subjectNames is empty"},
		{"subjectName over 250", service(`protocol: tls, validation: {caSecret: ca, subjectName: ` + long(251) + `}`),
			problemService, "ValidationInvalid", "validation.subjectName is 251 characters long, over the limit of 250"},
		{"caSecret over 317", service(`protocol: tls, validation: {caSecret: ` + long(318) + `, subjectName: a}`),
			problemService, "ValidationInvalid", "validation.caSecret is 318 characters long, over the limit of 317"},
		{"JWKS subjectNames[0] is not subjectName", jwks(`{caSecret: ca, subjectName: a.example.com, subjectNames: [b.example.com]}`),
			problemJWT, "RemoteJWKSUpstreamValidationInvalid", `remoteJWKS.validation.subjectNames[0] "b.example.com" must equal subjectName "a.example.com"`},
		{"two exact matches of a header", route(`{conditions: [{header: {name: x-a, exact: a}}, {header: {name: X-A, exact: b}}], services: [{name: s, port: 80}]}`),
			problemRoute, "HeaderMatchConditionsNotValid", `spec.routes[0].conditions[0] and [1]: header "X-A" has two exact conditions`},
		{"present and notpresent", route(`{conditions: [{prefix: /a}, {header: {name: x-a, present: true}}, {header: {name: x-a, notpresent: true}}], services: [{name: s, port: 80}]}`),
			problemRoute, "HeaderMatchConditionsNotValid", `conditions[1] and [2]: present and notpresent on header "x-a" contradict each other`},
		{"exact and notexact of one value", route(`{conditions: [{header: {name: x-a, notexact: a}}, {header: {name: x-a, exact: a}}], services: [{name: s, port: 80}]}`),
			problemRoute, "HeaderMatchConditionsNotValid", `exact and notexact of the same value on header "x-a"`},
		{"contains and notcontains of one value", route(`{conditions: [{header: {name: x-a, contains: a}}, {header: {name: x-a, notcontains: a}}], services: [{name: s, port: 80}]}`),
			problemRoute, "HeaderMatchConditionsNotValid", `contains and notcontains of the same value on header "x-a"`},
		{"two exact matches of a query parameter", route(`{conditions: [{queryParameter: {name: q, exact: a}}, {queryParameter: {name: q, exact: b}}], services: [{name: s, port: 80}]}`),
			problemRoute, "QueryParameterMatchConditionsNotValid", `spec.routes[0].conditions[0] and [1]: query parameter "q" has two exact conditions`},
		{"an include's contradictory headers", `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: p.example.com}, includes: [{name: child, conditions: [{prefix: /a}, {header: {name: x-a, present: true}}, {header: {name: x-a, notpresent: true}}]}]}}`,
			problemInclude, "HeaderMatchConditionsNotValid", `spec.includes[0].conditions[1] and [2]: present and notpresent`},
		{"JWKS subjectNames without subjectName", jwks(`{caSecret: ca, subjectNames: [b.example.com]}`),
			problemJWT, "RemoteJWKSUpstreamValidationInvalid", "remoteJWKS.validation.subjectName is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proxy(t, tc.doc)
			v := ValidateObject(p, nil, Options{})
			if !strings.Contains(v.Message(), tc.want) {
				t.Errorf("ValidateObject: %q, want a problem containing %q", v.Problems, tc.want)
			}
			g := build(p, svc("team", "s", ":80"))
			wantInvalid(t, g, "team", "root", tc.typ, tc.reason, tc.want)
		})
	}
}

func TestExtensionServiceSchemaLimits(t *testing.T) {
	for _, tc := range []struct{ name, validation, want string }{
		{"subjectNames without subjectName", `{caSecret: ca, subjectNames: [a.example.com]}`, "spec.validation.subjectName is required"},
		{"subjectNames[0] is not subjectName", `{caSecret: ca, subjectName: a, subjectNames: [b, a]}`, `spec.validation.subjectNames[0] "b" must equal subjectName "a"`},
		{"nine subjectNames", `{caSecret: ca, subjectName: a, subjectNames: [a, b, c, d, e, f, g, h, i]}`, "spec.validation.subjectNames has 9 names, over the limit of 8"},
		{"caSecret over 317", `{caSecret: ` + strings.Repeat("a", 318) + `, subjectName: a}`, "spec.validation.caSecret is 318 characters long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := fromYAML[contourv1alpha1.ExtensionService](t, `{metadata: {name: ext, namespace: team}, spec: {services: [{name: s, port: 80}], validation: `+tc.validation+`}}`)
			v := ValidateObject(es, nil, Options{})
			if !strings.Contains(v.Message(), tc.want) {
				t.Errorf("ValidateObject: %q, want a problem containing %q", v.Problems, tc.want)
			}
			g := build(es, svc("team", "s", ":80"))
			seen := false
			for _, st := range g.Statuses {
				if st.Object.Kind != KindExtensionService {
					continue
				}
				seen = true
				if st.Status != StatusInvalid || !strings.Contains(st.Description, tc.want) {
					t.Errorf("build: %v is %s (%q), want invalid for %q", st.Object, st.Status, st.Description, tc.want)
				}
			}
			if !seen {
				t.Error("build: no status for the ExtensionService")
			}
		})
	}
}

// TestConditionsThatDoNotConflict: what Contour lets stand together stands: different
// headers, different values, and a contradiction softened by ignoreCase or
// treatMissingAsEmpty.
func TestConditionsThatDoNotConflict(t *testing.T) {
	for _, conds := range []string{
		`{header: {name: x-a, exact: a}}, {header: {name: x-b, exact: a}}`,
		`{header: {name: x-a, exact: a}}, {header: {name: x-a, notexact: b}}`,
		`{header: {name: x-a, exact: a}}, {header: {name: x-a, notexact: a, ignoreCase: true}}`,
		`{header: {name: x-a, contains: a}}, {header: {name: x-a, notcontains: a, treatMissingAsEmpty: true}}`,
		`{header: {name: x-a, present: true}}, {header: {name: x-a, exact: a}}`,
		`{queryParameter: {name: q, exact: a}}, {queryParameter: {name: r, exact: a}}`,
		`{queryParameter: {name: q, exact: a}}, {queryParameter: {name: q, prefix: a}}`,
	} {
		p := proxy(t, `{metadata: {name: root, namespace: team}, spec: {virtualhost: {fqdn: p.example.com}, routes: [{conditions: [`+conds+`], services: [{name: s, port: 80}]}]}}`)
		if v := ValidateObject(p, nil, Options{}); len(v.Problems) > 0 {
			t.Errorf("%s: %q, want none", conds, v.Problems)
		}
	}
}
