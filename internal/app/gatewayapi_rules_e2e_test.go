package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// httpGatewayYAML is Portico's GatewayClass and Gateway default/gw with one HTTP
// listener on port 80.
const httpGatewayYAML = `kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners: [{name: http, protocol: HTTP, port: 80}]`

// TestGatewayAPIRulesEndToEnd sends real requests through the embedded proxy for the
// HTTPRoute rules the spec words precisely: the share of an invalid backendRef is
// answered 500 (never sent to the valid one), header values are literal ("%" too),
// and a PathPrefix with a trailing "/" matches the path without it.
func TestGatewayAPIRulesEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	web := testutil.StartEcho(t, echo.Config{Service: "web"})
	objs := testutil.DecodeObjects(t, httpGatewayYAML+`
---
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /half}}]
    backendRefs: [{name: web, port: 80}, {name: missing, port: 80}]
  - matches: [{path: {value: /dir/}}]
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: x-share, value: "50%"}, {name: x-fmt, value: "%REQ(:path)%"}]}}]
    backendRefs: [{name: web, port: 80}]`)
	objs = append(objs, echoService(t, "web", web), echoEndpoints(t, "web", web))
	name := translate.GatewayListenerName(types.NamespacedName{Namespace: "default", Name: "gw"}, 80)
	p := serveGateways(t, ctx, objs, name)
	addr := p.ListenerAddr(name)
	client := &http.Client{Timeout: 10 * time.Second}

	codes := map[int]int{}
	const n = 200
	for range n {
		resp, err := client.Get("http://" + addr + "/half")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	// Equal weights: about half each. The bounds are over 8 standard deviations wide.
	if codes[200]+codes[500] != n || codes[500] < 40 || codes[200] < 40 {
		t.Errorf("/half, one of two backends missing: answers %v; want about half 200, half 500, nothing else", codes)
	}

	resp, err := client.Get("http://" + addr + "/dir")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Service string
		Headers map[string][]string
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != 200 || answer.Service != "web" {
		t.Fatalf("/dir (route /dir/): %d from %q (%v), want 200 from web", resp.StatusCode, answer.Service, err)
	}
	if got := answer.Headers["X-Share"]; len(got) != 1 || got[0] != "50%" {
		t.Errorf("x-share reached the backend as %q, want [50%%]", got)
	}
	if got := answer.Headers["X-Fmt"]; len(got) != 1 || got[0] != "%REQ(:path)%" {
		t.Errorf("x-fmt reached the backend as %q, want the literal [%%REQ(:path)%%]", got)
	}
}
