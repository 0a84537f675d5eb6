package dag

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Seed 002's tables, row by row. Keywords as in the seed: UN unspecified, IN invalid, EM
// empty string, PT/NT positive/negative time, PN/NN positive/negative (bare) number.

func strVal(v string) *intstr.IntOrString { x := intstr.FromString(v); return &x }
func intVal(v int32) *intstr.IntOrString  { x := intstr.FromInt32(v); return &x }
func dur(d time.Duration) *time.Duration  { return &d }

type timeoutRow struct {
	name     string
	in       *intstr.IntOrString
	want     *time.Duration // nil: the proxy default
	wantNote bool
}

// Request | 0 / 0s / PN / NN → nil; IN / EM / UN / NT → nil; PT → PT; infinity → 0.
func TestSeed002RequestTimeout(t *testing.T) {
	for _, tc := range []timeoutRow{
		{"0", strVal("0"), nil, true},
		{"0 (bare YAML number)", intVal(0), nil, true},
		{"0s", strVal("0s"), nil, true},
		{"PN", strVal("5"), nil, true},
		{"PN (bare YAML number)", intVal(5), nil, true},
		{"NN", strVal("-5"), nil, true},
		{"NN (bare YAML number)", intVal(-5), nil, true},
		{"IN", strVal("hello"), nil, true},
		{"EM", strVal(""), nil, false},
		{"UN", nil, nil, false},
		{"NT", strVal("-1s"), nil, true},
		{"PT", strVal("1s"), dur(time.Second), false},
		{"PT ms", strVal("250ms"), dur(250 * time.Millisecond), false},
		{"PT compound", strVal("1m30s"), dur(90 * time.Second), false},
		{"infinity", strVal("infinity"), dur(0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := requestTimeout(policyInput{"timeoutPolicy.request", tc.in})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("timeout (-want +got):\n%s", diff)
			}
			if (note != "") != tc.wantNote {
				t.Errorf("note = %q, want a note: %v", note, tc.wantNote)
			}
			if note != "" && !strings.HasPrefix(note, "timeoutPolicy.request ") {
				t.Errorf("note %q does not name the field", note)
			}
		})
	}
}

// Idle | 0s → 0; 0 / IN / EM / UN → nil; NT / PN / NN → nil; PT → PT; infinity → 0.
func TestSeed002IdleTimeout(t *testing.T) {
	for _, tc := range []timeoutRow{
		{"0s", strVal("0s"), dur(0), false},
		{"0", strVal("0"), nil, true},
		{"0 (bare YAML number)", intVal(0), nil, true},
		{"IN", strVal("soon"), nil, true},
		{"EM", strVal(""), nil, false},
		{"UN", nil, nil, false},
		{"NT", strVal("-2s"), nil, true},
		{"PN", strVal("30"), nil, true},
		{"PN (bare YAML number)", intVal(30), nil, true},
		{"NN", strVal("-30"), nil, true},
		{"PT", strVal("2s"), dur(2 * time.Second), false},
		{"infinity", strVal("infinity"), dur(0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := idleTimeout(policyInput{"timeoutPolicy.idle", tc.in})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("timeout (-want +got):\n%s", diff)
			}
			if (note != "") != tc.wantNote {
				t.Errorf("note = %q, want a note: %v", note, tc.wantNote)
			}
		})
	}
}

// PerTryTimeout | 0 / 0s / PN / NN → nil; IN / EM / UN / NT → nil; PT → PT; "infinity" is
// invalid for every retry field.
func TestSeed002PerTryTimeout(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       *intstr.IntOrString
		want     time.Duration
		wantNote bool
	}{
		{"0", strVal("0"), 0, true},
		{"0s", strVal("0s"), 0, true},
		{"PN", strVal("5"), 0, true},
		{"PN (bare YAML number)", intVal(5), 0, true},
		{"NN", strVal("-5"), 0, true},
		{"IN", strVal("fast"), 0, true},
		{"EM", strVal(""), 0, false},
		{"UN", nil, 0, false},
		{"NT", strVal("-100ms"), 0, true},
		{"PT", strVal("150ms"), 150 * time.Millisecond, false},
		{"infinity", strVal("infinity"), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := perTryTimeout(policyInput{"retryPolicy.perTryTimeout", tc.in})
			if got != tc.want || (note != "") != tc.wantNote {
				t.Errorf("perTryTimeout = %v, %q; want %v, a note: %v", got, note, tc.want, tc.wantNote)
			}
		})
	}
}

// PT is used only when it is not longer than the route's request timeout (15s, the proxy
// default, when the route sets none); a longer one is ignored with a note.
func TestSeed002PerTryTimeoutLongerThanTheRequestTimeoutIsIgnored(t *testing.T) {
	for _, tc := range []struct {
		name     string
		request  *intstr.IntOrString
		perTry   string
		want     time.Duration
		wantNote string
	}{
		{"shorter than the request timeout", strVal("1s"), "100ms", 100 * time.Millisecond, ""},
		{"equal to the request timeout", strVal("1s"), "1s", time.Second, ""},
		{"longer than the request timeout", strVal("1s"), "2s", 0, "retryPolicy.perTryTimeout 2s is longer than the request timeout (1s); ignored"},
		{"longer than the default request timeout", nil, "20s", 0, "is longer than the request timeout (15s); ignored"},
		{"shorter than the default request timeout", nil, "10s", 10 * time.Second, ""},
		{"request timeout infinity", strVal("infinity"), "1h", time.Hour, ""},
		{"request timeout invalid: the default applies", strVal("-1s"), "2s", 2 * time.Second, ""},
		{"request timeout invalid, longer than the default", strVal("nope"), "16s", 0, "longer than the request timeout (15s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeouts, _ := buildTimeouts(policyInput{"timeoutPolicy.request", tc.request}, policyInput{})
			rp, notes := buildRetry(rawRetryPolicy{
				count:         policyInput{"retryPolicy.count", strVal("2")},
				perTryTimeout: policyInput{"retryPolicy.perTryTimeout", strVal(tc.perTry)},
			}, timeouts)
			if rp == nil || rp.PerTryTimeout != tc.want {
				t.Fatalf("retry policy = %+v, want per-try timeout %v", rp, tc.want)
			}
			joined := strings.Join(notes, "; ")
			if tc.wantNote == "" && joined != "" && strings.Contains(joined, "perTryTimeout") {
				t.Errorf("unexpected note %q", joined)
			}
			if !strings.Contains(joined, tc.wantNote) {
				t.Errorf("notes %q do not contain %q", joined, tc.wantNote)
			}
		})
	}
}

// NumRetries | NN / IN / EM / UN / NT / PT → 1; PN → PN; 0 → 0.
func TestSeed002RetryCount(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        *intstr.IntOrString
		want      uint32
		wantEmpty bool
		wantNote  bool
	}{
		{"NN", strVal("-1"), 1, false, true},
		{"NN (bare YAML number)", intVal(-3), 1, false, true},
		{"IN", strVal("many"), 1, false, true},
		{"EM", strVal(""), 1, true, false},
		{"UN", nil, 1, true, false},
		{"NT", strVal("-1s"), 1, false, true},
		{"PT", strVal("1s"), 1, false, true},
		{"PN", strVal("7"), 7, false, false},
		{"PN (bare YAML number)", intVal(7), 7, false, false},
		{"0", strVal("0"), 0, false, false},
		{"0 (bare YAML number)", intVal(0), 0, false, false},
		{"too large", strVal("4294967296"), 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, empty, note := retryCount(policyInput{"retryPolicy.count", tc.in})
			if n != tc.want || empty != tc.wantEmpty || (note != "") != tc.wantNote {
				t.Errorf("retryCount = %d, empty %v, note %q; want %d, empty %v, a note: %v", n, empty, note, tc.want, tc.wantEmpty, tc.wantNote)
			}
		})
	}
}

// OnStatusCodes | 50x → 500-509; 500 or 500,501 → those; PN < 500 or > 509 → 500-509;
// 10x, 2xx, 31x, 40x → 500-509; NN / IN / UN / NT / PT → 500-509.
func TestSeed002OnStatusCodes(t *testing.T) {
	all := []uint32{500, 501, 502, 503, 504, 505, 506, 507, 508, 509}
	codes := func(vs ...string) []intstr.IntOrString {
		var out []intstr.IntOrString
		for _, v := range vs {
			out = append(out, intstr.FromString(v))
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		in        []intstr.IntOrString
		want      []uint32
		wantEmpty bool
		wantNote  bool
	}{
		{"50x", codes("50x"), all, false, false},
		{"50X", codes("50X"), all, false, false},
		{"500", codes("500"), []uint32{500}, false, false},
		{"500,501", codes("500", "501"), []uint32{500, 501}, false, false},
		{"bare YAML number", []intstr.IntOrString{intstr.FromInt32(503)}, []uint32{503}, false, false},
		{"509", codes("509"), []uint32{509}, false, false},
		{"unsorted and repeated", codes("504", "502", "504"), []uint32{502, 504}, false, false},
		{"50x and a code", codes("502", "50x"), all, false, false},
		{"PN < 500", codes("404"), all, false, true},
		{"PN < 500 (200)", codes("200"), all, false, true},
		{"PN > 509", codes("510"), all, false, true},
		{"PN > 509 (599)", codes("599"), all, false, true},
		{"10x", codes("10x"), all, false, true},
		{"2xx", codes("2xx"), all, false, true},
		{"31x", codes("31x"), all, false, true},
		{"40x", codes("40x"), all, false, true},
		{"5xx", codes("5xx"), all, false, true},
		{"NN", codes("-500"), all, false, true},
		{"NN (bare YAML number)", []intstr.IntOrString{intstr.FromInt32(-503)}, all, false, true},
		{"IN", codes("oops"), all, false, true},
		{"UN", nil, all, true, false},
		{"NT", codes("-1s"), all, false, true},
		{"PT", codes("1s"), all, false, true},
		{"a valid and an invalid code", codes("503", "40x"), all, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, empty, notes := statusCodes("retryPolicy.onStatusCodes", tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("codes (-want +got):\n%s", diff)
			}
			if empty != tc.wantEmpty || (len(notes) > 0) != tc.wantNote {
				t.Errorf("empty %v, notes %q; want empty %v, a note: %v", empty, notes, tc.wantEmpty, tc.wantNote)
			}
		})
	}
}

// The conjunction table: EM/EM no retry; PN/EM PN times on 50x; PN/non-EM PN times on the
// given codes; EM/non-EM once on the given codes.
func TestSeed002RetryConjunctions(t *testing.T) {
	all := []uint32{500, 501, 502, 503, 504, 505, 506, 507, 508, 509}
	for _, tc := range []struct {
		name  string
		count *intstr.IntOrString
		codes []intstr.IntOrString
		want  *RetryPolicy
	}{
		{"EM / EM (unset)", nil, nil, nil},
		{"EM / EM (empty strings and list)", strVal(""), []intstr.IntOrString{}, nil},
		{"PN / EM", strVal("3"), nil, &RetryPolicy{NumRetries: 3, OnStatusCodes: all}},
		{"PN / non-EM", strVal("3"), []intstr.IntOrString{intstr.FromString("501"), intstr.FromString("502")}, &RetryPolicy{NumRetries: 3, OnStatusCodes: []uint32{501, 502}}},
		{"EM / non-EM", nil, []intstr.IntOrString{intstr.FromString("501")}, &RetryPolicy{NumRetries: 1, OnStatusCodes: []uint32{501}}},
		{"EM (empty string) / non-EM", strVal(""), []intstr.IntOrString{intstr.FromString("50x")}, &RetryPolicy{NumRetries: 1, OnStatusCodes: all}},
		{"0 / EM", strVal("0"), nil, &RetryPolicy{NumRetries: 0, OnStatusCodes: all}},
		{"IN / EM", strVal("x"), nil, &RetryPolicy{NumRetries: 1, OnStatusCodes: all}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := buildRetry(rawRetryPolicy{
				count:       policyInput{"retryPolicy.count", tc.count},
				statusCodes: tc.codes,
				codesField:  "retryPolicy.onStatusCodes",
			}, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("retry policy (-want +got):\n%s", diff)
			}
		})
	}
	// A per-try timeout without anything to retry is ignored, and said so.
	got, notes := buildRetry(rawRetryPolicy{perTryTimeout: policyInput{"retryPolicy.perTryTimeout", strVal("1s")}}, nil)
	if got != nil || len(notes) != 1 || !strings.Contains(notes[0], "retryPolicy.perTryTimeout is ignored") {
		t.Errorf("retry policy %+v, notes %q; want none and a note", got, notes)
	}
}

// The same tables through whole IngressRoutes: the seed's own examples, and inputs that are
// not usable, which never invalidate the object but are noted in its status.
func TestSeed002PoliciesThroughIngressRoutes(t *testing.T) {
	all := []uint32{500, 501, 502, 503, 504, 505, 506, 507, 508, 509}
	g := build(
		ir(t, `
metadata: {name: github, namespace: prod}
spec:
  virtualhost: {fqdn: www.github.com}
  routes:
  - match: /contour
    services: [{name: contour, port: 80}]
    timeoutPolicy: {request: 1s, idle: 2s}
    retryPolicy: {count: "7", onStatusCodes: ["501", "502"], perTryTimeout: 150ms}
  - match: /static-site
    services: [{name: static, port: 80}]
    timeoutPolicy: {request: 200ms, idle: 1s}
    retryPolicy: {count: "2", onStatusCodes: [50x]}
  - match: /
    services: [{name: httpbin, port: 8080}]
    timeoutPolicy: {request: 1s}
    retryPolicy: {maxRetries: "3", onStatusCodes: ["500", "501"]}
  - match: /httpbin
    prefixRewrite: /
    services: [{name: httpbin, port: 8080}]
    retryPolicy: {maxRetries: "10", onStatusCodes: [50x], perTryTimeout: 200ms}
  - match: /bare
    services: [{name: bare, port: 80}]
    timeoutPolicy: {request: 5, idle: 0}
    retryPolicy: {count: 4, onStatusCodes: [503]}
  - match: /infinite
    services: [{name: slow, port: 80}]
    timeoutPolicy: {request: infinity, idle: infinity}
    retryPolicy: {onStatusCodes: ["504"], perTryTimeout: infinity}
  - match: /bad
    services: [{name: bad, port: 80}]
    timeoutPolicy: {request: soon, idle: -1s}
    retryPolicy: {count: "-1", onStatusCodes: [40x, "999"], perTryTimeout: 20s}
  - match: /empty
    services: [{name: empty, port: 80}]
    timeoutPolicy: {}
    retryPolicy: {perTryTimeout: 1s}
  - match: /zero
    services: [{name: zero, port: 80}]
    timeoutPolicy: {request: 0s, idle: 0s}
    retryPolicy: {count: "0"}
`),
	)
	s := wantStatus(t, g, "prod", "github", StatusValid,
		`route "/bare": timeoutPolicy.request "5" has no unit`,
		`route "/bare": timeoutPolicy.idle "0" has no unit`,
		`route "/infinite": retryPolicy.perTryTimeout "infinity" is not a positive duration`,
		`route "/bad": timeoutPolicy.request "soon" is not a duration`,
		`route "/bad": timeoutPolicy.idle "-1s" is negative`,
		`route "/bad": retryPolicy.count "-1" is negative; 1 retry applies`,
		`route "/bad": retryPolicy.onStatusCodes "40x" is not a status code from 500 to 509`,
		`route "/bad": retryPolicy.onStatusCodes "999" is not a status code from 500 to 509`,
		`route "/bad": retryPolicy.perTryTimeout 20s is longer than the request timeout (15s); ignored`,
		`route "/empty": retryPolicy.perTryTimeout is ignored`,
		`route "/zero": timeoutPolicy.request "0s" is not positive`,
	)
	for _, m := range []string{"/contour", "/static-site", "/httpbin", "/"} {
		for _, f := range []string{"timeoutPolicy", "retryPolicy"} {
			if strings.Contains(s.Description, `route "`+m+`": `+f) {
				t.Errorf("the valid %s of route %q was noted: %q", f, m, s.Description)
			}
		}
	}
	type policy struct {
		Timeouts *TimeoutPolicy
		Retry    *RetryPolicy
	}
	got := map[string]policy{}
	for _, r := range httpHost(g, "www.github.com").Routes {
		got[r.Path.Value] = policy{r.Timeouts, r.Retry}
	}
	want := map[string]policy{
		"/contour":     {&TimeoutPolicy{Request: dur(time.Second), Idle: dur(2 * time.Second)}, &RetryPolicy{NumRetries: 7, OnStatusCodes: []uint32{501, 502}, PerTryTimeout: 150 * time.Millisecond}},
		"/static-site": {&TimeoutPolicy{Request: dur(200 * time.Millisecond), Idle: dur(time.Second)}, &RetryPolicy{NumRetries: 2, OnStatusCodes: all}},
		"/":            {&TimeoutPolicy{Request: dur(time.Second)}, &RetryPolicy{NumRetries: 3, OnStatusCodes: []uint32{500, 501}}},
		"/httpbin":     {nil, &RetryPolicy{NumRetries: 10, OnStatusCodes: all, PerTryTimeout: 200 * time.Millisecond}},
		"/httpbin/":    {nil, &RetryPolicy{NumRetries: 10, OnStatusCodes: all, PerTryTimeout: 200 * time.Millisecond}},
		"/bare":        {nil, &RetryPolicy{NumRetries: 4, OnStatusCodes: []uint32{503}}},
		"/infinite":    {&TimeoutPolicy{Request: dur(0), Idle: dur(0)}, &RetryPolicy{NumRetries: 1, OnStatusCodes: []uint32{504}}},
		"/bad":         {nil, &RetryPolicy{NumRetries: 1, OnStatusCodes: all}},
		"/empty":       {nil, nil},
		"/zero":        {&TimeoutPolicy{Idle: dur(0)}, &RetryPolicy{NumRetries: 0, OnStatusCodes: all}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
}

// A delegated vertex's policies apply to its routes, and its notes go to its own status.
func TestSeed002PoliciesOfADelegatedVertex(t *testing.T) {
	g := build(
		ir(t, `{metadata: {name: root, namespace: infra}, spec: {virtualhost: {fqdn: v.example.com}, routes: [{match: /api, delegate: {name: api, namespace: team}}]}}`),
		ir(t, `
metadata: {name: api, namespace: team}
spec:
  routes:
  - match: /api
    services: [{name: api, port: 80}]
    timeoutPolicy: {request: 3s, idle: nonsense}
    retryPolicy: {count: "2", perTryTimeout: 1s}
`),
	)
	r := httpHost(g, "v.example.com").Routes[0]
	want := []any{&TimeoutPolicy{Request: dur(3 * time.Second)}, &RetryPolicy{NumRetries: 2, OnStatusCodes: []uint32{500, 501, 502, 503, 504, 505, 506, 507, 508, 509}, PerTryTimeout: time.Second}}
	if diff := cmp.Diff(want, []any{r.Timeouts, r.Retry}); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
	wantStatus(t, g, "team", "api", StatusValid, `route "/api": timeoutPolicy.idle "nonsense" is not a duration`)
	if s := irStatus(t, g, "infra", "root"); strings.Contains(s.Description, "nonsense") {
		t.Errorf("the delegating root was given the vertex's note: %q", s.Description)
	}
}

// The timeout and retry annotations apply to every route of an Ingress, under any of their
// three spellings.
func TestIngressPolicyAnnotations(t *testing.T) {
	all := []uint32{500, 501, 502, 503, 504, 505, 506, 507, 508, 509}
	for _, tc := range []struct {
		name        string
		annotations string
		timeouts    *TimeoutPolicy
		retry       *RetryPolicy
		notes       []string
	}{
		{name: "none"},
		{name: "request timeout", annotations: `portico.dev/request-timeout: 2s`, timeouts: &TimeoutPolicy{Request: dur(2 * time.Second)}},
		{name: "request timeout, contour.heptio.com", annotations: `contour.heptio.com/request-timeout: 3s`, timeouts: &TimeoutPolicy{Request: dur(3 * time.Second)}},
		{name: "request timeout, projectcontour.io", annotations: `projectcontour.io/request-timeout: infinity`, timeouts: &TimeoutPolicy{Request: dur(0)}},
		{name: "portico.dev spelling wins", annotations: `{portico.dev/request-timeout: 1s, contour.heptio.com/request-timeout: 9s}`, timeouts: &TimeoutPolicy{Request: dur(time.Second)}},
		{name: "idle timeout", annotations: `portico.dev/idle-timeout: 0s`, timeouts: &TimeoutPolicy{Idle: dur(0)}},
		{name: "idle timeout, contour.heptio.com", annotations: `contour.heptio.com/idle-timeout: 45s`, timeouts: &TimeoutPolicy{Idle: dur(45 * time.Second)}},
		{name: "idle timeout, projectcontour.io", annotations: `projectcontour.io/idle-timeout: 1m`, timeouts: &TimeoutPolicy{Idle: dur(time.Minute)}},
		{name: "num retries", annotations: `portico.dev/num-retries: "3"`, retry: &RetryPolicy{NumRetries: 3, OnStatusCodes: all}},
		{name: "num retries, contour.heptio.com", annotations: `contour.heptio.com/num-retries: "4"`, retry: &RetryPolicy{NumRetries: 4, OnStatusCodes: all}},
		{name: "num retries, projectcontour.io", annotations: `projectcontour.io/num-retries: "0"`, retry: &RetryPolicy{NumRetries: 0, OnStatusCodes: all}},
		{name: "status codes, comma-separated", annotations: `portico.dev/retry-on-status-codes: "502, 503,504"`, retry: &RetryPolicy{NumRetries: 1, OnStatusCodes: []uint32{502, 503, 504}}},
		{name: "status codes, contour.heptio.com", annotations: `contour.heptio.com/retry-on-status-codes: "50x"`, retry: &RetryPolicy{NumRetries: 1, OnStatusCodes: all}},
		{name: "status codes, projectcontour.io", annotations: `projectcontour.io/retry-on-status-codes: "501"`, retry: &RetryPolicy{NumRetries: 1, OnStatusCodes: []uint32{501}}},
		{name: "status codes and count", annotations: `{portico.dev/num-retries: "5", portico.dev/retry-on-status-codes: "503"}`, retry: &RetryPolicy{NumRetries: 5, OnStatusCodes: []uint32{503}}},
		{name: "per-try timeout", annotations: `{portico.dev/num-retries: "2", portico.dev/per-try-timeout: 500ms}`, retry: &RetryPolicy{NumRetries: 2, OnStatusCodes: all, PerTryTimeout: 500 * time.Millisecond}},
		{name: "per-try timeout, contour.heptio.com", annotations: `{contour.heptio.com/num-retries: "2", contour.heptio.com/per-try-timeout: 1s}`, retry: &RetryPolicy{NumRetries: 2, OnStatusCodes: all, PerTryTimeout: time.Second}},
		{name: "per-try timeout, projectcontour.io", annotations: `{projectcontour.io/num-retries: "2", projectcontour.io/per-try-timeout: 2s}`, retry: &RetryPolicy{NumRetries: 2, OnStatusCodes: all, PerTryTimeout: 2 * time.Second}},
		{name: "per-try timeout longer than the request timeout", annotations: `{portico.dev/request-timeout: 1s, portico.dev/num-retries: "2", portico.dev/per-try-timeout: 2s}`,
			timeouts: &TimeoutPolicy{Request: dur(time.Second)}, retry: &RetryPolicy{NumRetries: 2, OnStatusCodes: all},
			notes: []string{"annotation portico.dev/per-try-timeout 2s is longer than the request timeout (1s); ignored"}},
		{name: "per-try timeout alone", annotations: `portico.dev/per-try-timeout: 1s`, notes: []string{"annotation portico.dev/per-try-timeout is ignored"}},
		{name: "invalid values are noted", annotations: `{contour.heptio.com/request-timeout: soon, portico.dev/num-retries: "-2", projectcontour.io/retry-on-status-codes: "40x"}`,
			retry: &RetryPolicy{NumRetries: 1, OnStatusCodes: all},
			notes: []string{
				`annotation contour.heptio.com/request-timeout "soon" is not a duration`,
				`annotation portico.dev/num-retries "-2" is negative`,
				`annotation projectcontour.io/retry-on-status-codes "40x" is not a status code from 500 to 509`,
			}},
		{name: "retry-on is unsupported", annotations: `contour.heptio.com/retry-on: 5xx,gateway-error`,
			notes: []string{"annotation contour.heptio.com/retry-on is not supported; list status codes in portico.dev/retry-on-status-codes instead"}},
		{name: "retry-on is unsupported, projectcontour.io", annotations: `projectcontour.io/retry-on: 5xx`,
			notes: []string{"annotation projectcontour.io/retry-on is not supported"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := "metadata: {name: web}"
			if tc.annotations != "" {
				meta = "metadata:\n  name: web\n  annotations: {" + strings.Trim(tc.annotations, "{}") + "}"
			}
			g := build(ing(t, meta+`
spec:
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  rules:
  - host: a.example.com
    http:
      paths:
      - {path: /x, pathType: Prefix, backend: {service: {name: x, port: {number: 80}}}}
      - {path: /y, pathType: Exact, backend: {service: {name: why, port: {number: 80}}}}
  - host: b.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: b, port: {number: 80}}}}]}
`))
			n := 0
			for _, vh := range g.HTTP {
				for _, r := range vh.Routes {
					n++
					if diff := cmp.Diff(tc.timeouts, r.Timeouts); diff != "" {
						t.Errorf("%s %s timeouts (-want +got):\n%s", vh.Name, r.Path.Value, diff)
					}
					if diff := cmp.Diff(tc.retry, r.Retry); diff != "" {
						t.Errorf("%s %s retry (-want +got):\n%s", vh.Name, r.Path.Value, diff)
					}
				}
			}
			if n != 5 {
				t.Errorf("got %d routes, want 5 (2 + default on a.example.com, 1 on b.example.com, the catch-all)", n)
			}
			s := statusOf(g, "default", "web")
			if s.Status != StatusValid {
				t.Errorf("status = %+v, want valid", s)
			}
			for _, note := range tc.notes {
				if !strings.Contains(s.Description, note) {
					t.Errorf("status %q does not contain %q", s.Description, note)
				}
			}
		})
	}
}
