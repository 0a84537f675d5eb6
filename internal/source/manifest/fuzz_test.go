package manifest

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
)

func FuzzDecode(f *testing.F) {
	seeds := []string{
		svcYAML("a", 80),
		svcYAML("a", 80) + "---\n" + svcYAML("b", 81),
		svcJSON("j", 1),
		strings.ReplaceAll(v1beta1Ingress, "%s", "networking.k8s.io/v1beta1"),
		strings.ReplaceAll(v1beta1Ingress, "%s", "extensions/v1beta1"),
		"apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: c, namespace: x}\nspec: {controller: c, parameters: {kind: K, name: n}}\n",
		"apiVersion: networking.k8s.io/v1beta1\nkind: IngressClass\nmetadata: {name: c}\n",
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {a: b}\ndata: {c: ZA==}\n",
		"apiVersion: v1\nkind: Endpoints\nmetadata: {name: e}\nsubsets: [{addresses: [{ip: 1.2.3.4}], ports: [{port: 1}]}]\n",
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\naddressType: IPv4\nports: [{port: 1}]\nendpoints: []\n",
		"apiVersion: v1\nkind: List\nitems:\n- " + svcJSON("l", 1) + "\n- {apiVersion: v1, kind: List, items: [{}]}\n",
		"apiVersion: networking.k8s.io/v1\nkind: IngressList\nitems: [{metadata: {name: i}}, {}]\n",
		"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x}\nspec: {rules: [{http: {paths: [{pathtype: Prefix}]}}]}\n",
		"apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: r}\nspec:\n  virtualhost: {fqdn: a.b, tls: {secretName: s}}\n  routes:\n  - {match: /, services: [{name: s, port: 80}], retryPolicy: {count: 1, onStatusCodes: [\"50x\", 502]}}\n  - {match: /a, service: {name: s, port: 80}, timeoutPolicy: {request: 1s, idle: 0}}\n  - {match: /b, service: [{name: s, port: 1}], delegate: {name: d}}\n",
		"apiVersion: contour.heptio.com/v1beta1\nkind: TLSCertificateDelegation\nmetadata: {name: d}\nspec: {delegations: [{secretName: s, targetNamespaces: ['*']}]}\n",
		"apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: p}\nspec:\n  virtualhost: {fqdn: a.b, tls: {secretName: s, clientValidation: {caSecret: ca}}, corsPolicy: {allowOrigin: ['*'], allowMethods: [GET]}}\n  includes: [{name: i, namespace: n, conditions: [{prefix: /i}, {header: {name: x, notcontains: y}}]}]\n  routes:\n  - conditions: [{prefix: /}, {cookie: a=b}, {userAgent: c}, {queryParameter: {name: q, present: true}}]\n    services: [{name: s, port: 80, weight: 1, protocol: h2c}]\n    retryPolicy: {count: 1, retryOn: [5xx], retriableStatusCodes: [502]}\n    failurePolicy: {count: 2, consecutive5xx: 3, retryPolicyEnabled: false}\n    requestRedirectPolicy: {statusCode: 301}\n",
		"apiVersion: projectcontour.io/v1\nkind: HTTPProxy\nmetadata: {name: t}\nspec: {virtualhost: {fqdn: t, tls: {passthrough: true}}, tcpproxy: {services: [{name: s, port: 1}], includes: {name: x}}}\n",
		"apiVersion: projectcontour.io/v1\nkind: TLSCertificateDelegation\nmetadata: {name: d}\nspec: {delegations: [{secretName: s, targetNamespaces: ['*']}]}\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n\tname: tab\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a, name: b}\n",
		"kind: Service\n", "---\n---\n# c\n", "- a\n- b\n", "x: [\n", "apiVersion: 1\nkind: {}\n",
		"a: &a [*a, *a]\n", "apiVersion: v1\nkind: Service\nmetadata: {name: ''}\n",
		`{"apiVersion": "v1", "kind": "List", "items": [` + svcJSON("a", 1) + `, 3, null, []]}`,
		`[1, 2]`, `{"a": `, "\ufeff{}", "null", `"str"`,
		"apiVersion: v1\nkind: Service\nmetadata: {name: caf\xe9}\n",
		"d: &d {port: x}\napiVersion: v1\nkind: Service\nmetadata: {name: a, annotations: {n: 1}}\nspec: {ports: [{<<: *d}, {port: [2]}]}\n",
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: s}, data: {a.b: '!!'}}\n- {apiVersion: v1, kind: Servic}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		file := "f.yaml"
		if asJSON {
			file = "f.json"
		}
		objs, probs := Decode(file, data)
		for _, o := range objs {
			gvk := o.GetObjectKind().GroupVersionKind()
			info, ok := keptKinds[gvk]
			if !ok || info.target != gvk {
				t.Fatalf("returned object of unexpected kind %v (%T)", gvk, o)
			}
			acc, err := meta.Accessor(o)
			if err != nil {
				t.Fatalf("%T: %v", o, err)
			}
			if acc.GetName() == "" {
				t.Fatalf("%v without a name", gvk)
			}
			if info.namespaced != (acc.GetNamespace() != "") {
				t.Fatalf("%v %q: namespace %q", gvk, acc.GetName(), acc.GetNamespace())
			}
		}
		lines := max(bytes.Count(data, []byte("\n")), yamlLineBreaks(data)) + 1
		for _, p := range probs {
			if p.File != file || p.Line < 1 || p.Line > lines || p.Column < 0 || p.Document < 1 || p.Reason == "" {
				t.Fatalf("malformed problem %#v (the file has %d lines)", p, lines)
			}
			if strings.HasPrefix(p.Reason, "internal error") {
				t.Fatalf("decoder panicked: %s", p)
			}
		}
	})
}

// yamlLineBreaks counts the line breaks of data as YAML does (YAML 1.2,
// section 5.4): CRLF, LF, and a CR alone, so that a problem the YAML decoder
// places on the third line of "a: 1\rb: 2\rc:" is on a line of the file.
func yamlLineBreaks(data []byte) int {
	return bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) - bytes.Count(data, []byte("\r\n"))
}
