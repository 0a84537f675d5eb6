package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/echo"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// TestGatewayHTTPSOnlyEndToEnd is the conformance suite's HTTPRouteHTTPSListener on a
// Gateway whose listeners are all HTTPS: a route with a hostname that the listener
// without a hostname serves, and a route without hostnames on the listener for
// second-example.org. No other route uses their Services, so the data plane gets their
// clusters from these routes or not at all (the first one's it did not get: the proxy
// never became ready).
func TestGatewayHTTPSOnlyEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	v1 := testutil.StartEcho(t, echo.Config{Service: "infra-backend-v1"})
	v2 := testutil.StartEcho(t, echo.Config{Service: "infra-backend-v2"})
	objs := testutil.DecodeObjects(t, gatewayGW+`
  - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: cert}]}}
  - {name: https-with-hostname, protocol: HTTPS, port: 443, hostname: second-example.org, tls: {certificateRefs: [{name: cert}]}}
---
kind: HTTPRoute
metadata: {name: httproute-https-test}
spec:
  parentRefs: [{name: gw}]
  hostnames: [example.org]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: httproute-https-test-no-hostname}
spec:
  parentRefs: [{name: gw, sectionName: https-with-hostname}]
  rules: [{backendRefs: [{name: infra-backend-v2, port: 80}]}]`)
	objs = append(objs, echoService(t, "infra-backend-v1", v1), echoEndpoints(t, "infra-backend-v1", v1),
		echoService(t, "infra-backend-v2", v2), echoEndpoints(t, "infra-backend-v2", v2),
		testutil.TLSSecret("default", "cert", testutil.SelfSigned("example.org", "second-example.org")))
	name := translate.GatewayListenerName(types.NamespacedName{Namespace: "default", Name: "gw"}, 443)
	addr := serveGateways(t, ctx, objs, name).ListenerAddr(name)

	for _, tc := range []struct {
		host, service string
		status        int
	}{
		{"example.org", "infra-backend-v1", http.StatusOK},
		{"unknown-example.org", "", http.StatusNotFound},
		{"second-example.org", "infra-backend-v2", http.StatusOK},
	} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{ServerName: tc.host, InsecureSkipVerify: true}}}
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = tc.host
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: %v", tc.host, err)
			continue
		}
		var answer struct{ Service string }
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		if resp.StatusCode != tc.status || answer.Service != tc.service {
			t.Errorf("%s: %d from %q, want %d from %q", tc.host, resp.StatusCode, answer.Service, tc.status, tc.service)
		}
	}
}
