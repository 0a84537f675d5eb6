package translate

import (
	"testing"

	grpcwebv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"

	"github.com/portico-dev/portico/internal/dag"
)

// Every connection manager, plain and HTTPS, has the gRPC-Web filter before CORS, as
// Contour's do, with no configuration (Translate validates it: ValidateAll).
func TestGRPCWebFilterEverywhere(t *testing.T) {
	web := testCluster("team", "web", 80)
	web.Protocol = "h2c"
	vh := dag.VirtualHost{Name: "grpc.example.com", Routes: []*dag.Route{route(dag.PathPrefix, "/", web)}}
	svh := &dag.SecureVirtualHost{VirtualHost: vh, Secret: &dag.Secret{Name: "team/cert", Cert: []byte("c"), Key: []byte("k")}}
	res, err := Translate(&dag.Graph{HTTP: []*dag.VirtualHost{&vh}, HTTPS: []*dag.SecureVirtualHost{svh}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := hcms(t, res)
	if len(hs) != 2 {
		t.Fatalf("%d connection managers, want 2 (HTTP, HTTPS)", len(hs))
	}
	for _, h := range hs {
		at := filterIndex(h, GRPCWebFilterName)
		if at < 0 || at > filterIndex(h, "envoy.filters.http.cors") {
			t.Fatalf("http_filters %v: want %s before envoy.filters.http.cors", h.HttpFilters, GRPCWebFilterName)
		}
		f := h.HttpFilters[at]
		var cfg grpcwebv3.GrpcWeb
		if err := f.GetTypedConfig().UnmarshalTo(&cfg); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if f.Disabled || f.IsOptional {
			t.Errorf("%s: disabled %v, optional %v; want it on for every route", f.Name, f.Disabled, f.IsOptional)
		}
	}
}
