package app

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// startHealthServer serves the gRPC health service in clear text (h2c), reporting
// only the service name serving as SERVING: which backend answered a call shows in
// whether that name is known.
func startHealthServer(t *testing.T, serving string) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	hs.SetServingStatus(serving, healthpb.HealthCheckResponse_SERVING)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// TestGRPCRouteEndToEnd routes real gRPC calls through the embedded proxy to two gRPC
// servers by a GRPCRoute: a method and header match to one, the rest of the service to
// the other, with a response header set per rule; a call is a POST, so a GET of the
// method's path matches nothing.
func TestGRPCRouteEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := startHealthServer(t, "backend-a"), startHealthServer(t, "backend-b")
	objs := testutil.DecodeObjects(t, httpGatewayYAML+`
---
kind: GRPCRoute
metadata: {name: health, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - method: {service: grpc.health.v1.Health, method: Check}
      headers: [{name: x-backend, value: b}]
    filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-rule, value: b}]}}]
    backendRefs: [{name: b, port: 80}]
  - matches: [{method: {service: grpc.health.v1.Health}}]
    filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-rule, value: a}]}}]
    backendRefs: [{name: a, port: 80}]`)
	objs = append(objs, echoService(t, "a", a), echoEndpoints(t, "a", a), echoService(t, "b", b), echoEndpoints(t, "b", b))
	name := translate.GatewayListenerName(types.NamespacedName{Namespace: "default", Name: "gw"}, 80)
	p := serveGateways(t, ctx, objs, name)
	addr := p.ListenerAddr(name)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	check := func(service string, md ...string) (codes.Code, string) {
		t.Helper()
		callCtx, done := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, md...), 10*time.Second)
		defer done()
		// An error answered at once is trailers only: its headers are the trailer.
		var header, trailer metadata.MD
		resp, err := client.Check(callCtx, &healthpb.HealthCheckRequest{Service: service}, grpc.Header(&header), grpc.Trailer(&trailer))
		rule := ""
		if v := append(header.Get("x-rule"), trailer.Get("x-rule")...); len(v) > 0 {
			rule = v[0]
		}
		if err != nil {
			return status.Code(err), rule
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%s): %v", service, resp.GetStatus())
		}
		return codes.OK, rule
	}
	for _, tc := range []struct {
		service  string
		md       []string
		code     codes.Code
		wantRule string
	}{
		{"backend-a", nil, codes.OK, "a"},
		{"backend-b", []string{"x-backend", "b"}, codes.OK, "b"},
		// Without the header, backend a answers: it does not know backend-b.
		{"backend-b", nil, codes.NotFound, "a"},
	} {
		if code, rule := check(tc.service, tc.md...); code != tc.code || rule != tc.wantRule {
			t.Errorf("Check(%s) with %v: %v from rule %q, want %v from rule %q", tc.service, tc.md, code, rule, tc.code, tc.wantRule)
		}
	}
	resp, err := http.Get("http://" + addr + "/grpc.health.v1.Health/Check")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET of the method's path: %d, want 404 (gRPC calls are POSTs)", resp.StatusCode)
	}
}
