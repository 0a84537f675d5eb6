package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A body the ext_authz filter read the start of reaches the upstream whole, also when
// the router retries it: the filter's bytes are sent first, then the rest.
func TestFilterReadBodyReachesUpstream(t *testing.T) {
	var mu sync.Mutex
	var authzGot []string
	authz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		authzGot = append(authzGot, string(b)+"|"+r.Header.Get("X-Envoy-Auth-Partial-Body"))
		mu.Unlock()
	}))
	t.Cleanup(authz.Close)
	attempts := 0
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		attempts++
		first := attempts%2 == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable) // retried
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(upstream.Close)

	l := modifyHCM(t, func(h *hcmv3.HttpConnectionManager) {
		cfg := &extauthzv3.ExtAuthz{
			Services: &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{ServerUri: &corev3.HttpUri{
				Uri: "http://authz/", HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: "authz"}, Timeout: durationpb.New(30 * time.Second),
			}}},
			TransportApiVersion: corev3.ApiVersion_V3,
			WithRequestBody:     &extauthzv3.BufferSettings{MaxRequestBytes: 4, AllowPartialMessage: true},
		}
		h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.ext_authz", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, cfg)}}}, h.HttpFilters...)
	})
	route := withAction(toCluster("up", prefixMatch("/")), func(a *routev3.RouteAction) {
		a.RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx", NumRetries: wrapperspb.UInt32(1)}
	})
	cp := startControlPlane(t)
	cp.set("v1", resources{
		listeners: []*listenerv3.Listener{l},
		routes:    []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", route))},
		clusters:  []*clusterv3.Cluster{edsCluster("up"), edsCluster("authz")},
		endpoints: []*endpointv3.ClusterLoadAssignment{assignment("up", upstream.Listener.Addr().String()), assignment("authz", authz.Listener.Addr().String())},
	})
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	for _, tc := range []struct {
		name   string
		body   io.Reader
		length int64
	}{
		{"declared length", strings.NewReader("hello world"), 11},
		{"chunked", io.MultiReader(strings.NewReader("hello"), strings.NewReader(" world")), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+p.ListenerAddr("ingress_http")+"/up", io.NopCloser(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tc.length
			res := do(t, http.DefaultClient, req)
			if res.Status != 200 || res.Body != "hello world" {
				t.Errorf("status %d, the upstream got %q, want the whole body", res.Status, res.Body)
			}
			mu.Lock()
			defer mu.Unlock()
			if got := authzGot[len(authzGot)-1]; got != "hell|true" {
				t.Errorf("the authorization server got %q, want the first 4 bytes, partial", got)
			}
		})
	}
}
