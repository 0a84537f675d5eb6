package gatewayapi

import (
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/dag"
)

// TestStatusSummaries checks what `portico check` shows of Gateway API objects: valid
// or invalid, a description saying what is wrong and what to do, and the problems with
// the condition type and reason of each.
func TestStatusSummaries(t *testing.T) {
	g := build(t, base+gatewayHead+`
  - {name: http, protocol: HTTP, port: 80}
  - {name: udp, protocol: UDP, port: 53}`+route("served", "default", `
  parentRefs: [{name: gw}, {name: gw, sectionName: udp}]
  rules: [{backendRefs: [{name: web, port: 80}, {name: web, namespace: other, port: 80}]}]`)+route("refused", "default", `
  parentRefs: [{name: gw}]
  rules: [{filters: [{type: ExternalAuth, externalAuth: {protocol: HTTP, backendRef: {name: auth, port: 80}}}]}]`))
	for _, tc := range []struct {
		object      dag.ObjectRef
		status      dag.StatusValue
		description []string
		problem     dag.Problem // the first error, or else the first warning
	}{{
		object:      dag.ObjectRef{Kind: dag.KindGateway, Namespace: "default", Name: "gw"},
		status:      dag.StatusValid,
		description: []string{"served: 1 listeners", `listener udp: protocol "UDP" is not supported: use HTTP, HTTPS or TLS`},
		problem:     dag.Problem{Type: "Accepted", Reason: "UnsupportedProtocol"},
	}, {
		object:      dag.ObjectRef{Kind: dag.KindHTTPRoute, Namespace: "default", Name: "served"},
		status:      dag.StatusValid,
		description: []string{"attached to 1 of 2 parents", `parent gw: the listener named "udp" of Gateway default/gw is not accepted`, "add one", "would send it are answered 500"},
		problem:     dag.Problem{Type: "Accepted", Reason: "NotAllowedByListeners"},
	}, {
		object:      dag.ObjectRef{Kind: dag.KindHTTPRoute, Namespace: "default", Name: "refused"},
		status:      dag.StatusInvalid,
		description: []string{`filter type "ExternalAuth" is not supported`, "remove it"},
		problem:     dag.Problem{Type: "Accepted", Reason: "UnsupportedValue"},
	}} {
		sts := dag.StatusesOf(g.Statuses, tc.object)
		if len(sts) != 1 {
			t.Fatalf("%s: %d statuses", tc.object, len(sts))
		}
		st := sts[0]
		if st.Status != tc.status {
			t.Errorf("%s: %s, want %s (%s)", tc.object, st.Status, tc.status, st.Description)
		}
		for _, d := range tc.description {
			if !strings.Contains(st.Description, d) {
				t.Errorf("%s: description %q does not say %q", tc.object, st.Description, d)
			}
		}
		first := append(append([]dag.Problem{}, st.Errors...), st.Warnings...)
		if len(first) == 0 || first[0].Type != tc.problem.Type || first[0].Reason != tc.problem.Reason {
			t.Errorf("%s: problems %+v, want first %s/%s", tc.object, first, tc.problem.Type, tc.problem.Reason)
		}
	}
}
