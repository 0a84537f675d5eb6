package proxy

import (
	"io"
	"net/http"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestRetryOnConditions covers retry_on values beyond the translator's:
// retriable-4xx and the gRPC ones, which look at a grpc-status in the
// response headers only, as Envoy's.
func TestRetryOnConditions(t *testing.T) {
	cp := startControlPlane(t)
	var res resources
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	vh := vhost("*")
	add := func(name, on string, handle func(int64, http.ResponseWriter, *http.Request)) {
		b := startScripted(t, handle)
		res.clusters = append(res.clusters, edsCluster(name))
		res.endpoints = append(res.endpoints, assignment(name, b.addr()))
		vh.Routes = append(vh.Routes, retryRoute(name, "/"+name, &routev3.RetryPolicy{RetryOn: on, NumRetries: wrapperspb.UInt32(2)}))
	}
	// grpcFirst answers the first request with a trailers-only gRPC status.
	grpcFirst := func(status string) func(int64, http.ResponseWriter, *http.Request) {
		return func(n int64, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			if n == 1 {
				w.Header().Set("Grpc-Status", status)
				return
			}
			w.Header().Set("Grpc-Status", "0")
		}
	}
	grpcTrailer := func(_ int64, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		_, _ = io.WriteString(w, "message")
		w.Header().Set("Grpc-Status", "14")
	}
	add("conflict", "retriable-4xx", failFirst(1, http.StatusConflict))
	add("timeout-408", "retriable-4xx", failFirst(1, http.StatusRequestTimeout))
	add("unavailable", "unavailable", grpcFirst("14"))
	add("internal", "cancelled,internal", grpcFirst("13"))
	add("exhausted", "resource-exhausted", grpcFirst("8"))
	add("deadline", "deadline-exceeded", grpcFirst("4"))
	add("cancelled", "cancelled", grpcFirst("1"))
	add("other-code", "unavailable", grpcFirst("13"))
	add("trailer", "unavailable", grpcTrailer)
	add("refused-stream", "refused-stream", failFirst(1, 503))
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vh)}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	c := noRedirectClient()
	for _, tc := range []struct {
		path         string
		wantStatus   int
		wantGRPC     string
		wantAttempts int
	}{
		{"/conflict", 200, "", 2},
		{"/timeout-408", 408, "", 1}, // only 409 is a retriable 4xx
		{"/unavailable", 200, "0", 2},
		{"/internal", 200, "0", 2},
		{"/exhausted", 200, "0", 2},
		{"/deadline", 200, "0", 2},
		{"/cancelled", 200, "0", 2},
		{"/other-code", 200, "13", 1},
		{"/trailer", 200, "", 1}, // a status in trailers never triggers a retry
		{"/refused-stream", 503, "", 1},
	} {
		r := get(t, c, p.httpURL(t, tc.path), "retry.example.com", nil)
		if r.Status != tc.wantStatus || r.Header.Get("Grpc-Status") != tc.wantGRPC {
			t.Errorf("%s: got %d grpc-status %q, want %d %q", tc.path, r.Status, r.Header.Get("Grpc-Status"), tc.wantStatus, tc.wantGRPC)
		}
		if got := attemptsOf(t, p, r); got != tc.wantAttempts {
			t.Errorf("%s: attempts %d, want %d", tc.path, got, tc.wantAttempts)
		}
	}
}
