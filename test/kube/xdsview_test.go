package kube

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// xdsView is a data plane's view of the virtual hosts a controller serves: a delta ADS
// client that asks for VHDS as the embedded proxy does (one VirtualHost resource per
// plain-HTTP host, sent when that host changes), ACKs every response, and records each
// host's route paths as they arrive, from VirtualHost resources and from the hosts of
// route configurations not served by VHDS. Waiting on it times an update up to the moment a
// data plane has it, without polling.
type xdsView struct {
	mu      sync.Mutex
	paths   map[string][]string // VirtualHost resource name → route paths
	domains map[string][]string // VirtualHost resource name → domains
	inline  map[string]bool     // the names of virtual hosts held inline by a route configuration
	changed chan struct{}       // closed and replaced on every response
	err     error
}

// watchXDS opens the stream to the xDS server at addr until the test ends.
func watchXDS(t *testing.T, addr string) *xdsView {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "scale-test-view", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"portico.io/vhds": structpb.NewBoolValue(true),
	}}}
	types := []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType,
		resourcev3.RouteType, resourcev3.VirtualHostType, resourcev3.SecretType}
	for i, typeURL := range types {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typeURL, ResourceNamesSubscribe: []string{"*"}}
		if i == 0 {
			req.Node = node
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	v := &xdsView{paths: map[string][]string{}, domains: map[string][]string{}, inline: map[string]bool{}, changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		v.receive(stream)
	}()
	t.Cleanup(func() { cancel(); <-done; conn.Close() })
	return v
}

func (v *xdsView) receive(stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) {
	for {
		resp, err := stream.Recv()
		if err == nil {
			err = stream.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
		}
		v.mu.Lock()
		if err != nil {
			v.err = err
		} else if resp.GetTypeUrl() == resourcev3.VirtualHostType {
			v.apply(resp)
		} else if resp.GetTypeUrl() == resourcev3.RouteType {
			v.applyRoutes(resp)
		}
		close(v.changed)
		v.changed = make(chan struct{})
		v.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// apply records a VirtualHost response; v.mu is held.
func (v *xdsView) apply(resp *discoveryv3.DeltaDiscoveryResponse) {
	for _, name := range resp.GetRemovedResources() {
		delete(v.paths, name)
		delete(v.domains, name)
	}
	for _, r := range resp.GetResources() {
		var vh routev3.VirtualHost
		if err := r.GetResource().UnmarshalTo(&vh); err != nil {
			v.err = err
			return
		}
		v.paths[r.GetName()], v.domains[r.GetName()] = routePaths(&vh), vh.GetDomains()
	}
}

// applyRoutes records the virtual hosts that route configurations hold inline (those
// not served by VHDS, or by a server without it) as "<configuration>/<host>"; v.mu is
// held.
func (v *xdsView) applyRoutes(resp *discoveryv3.DeltaDiscoveryResponse) {
	forget := func(rc string) {
		for name := range v.paths {
			if strings.HasPrefix(name, rc+"/") && v.inline[name] {
				delete(v.paths, name)
				delete(v.domains, name)
				delete(v.inline, name)
			}
		}
	}
	for _, name := range resp.GetRemovedResources() {
		forget(name)
	}
	for _, r := range resp.GetResources() {
		var rc routev3.RouteConfiguration
		if err := r.GetResource().UnmarshalTo(&rc); err != nil {
			v.err = err
			return
		}
		forget(rc.GetName())
		for _, vh := range rc.GetVirtualHosts() {
			name := rc.GetName() + "/" + vh.GetName()
			v.paths[name], v.domains[name], v.inline[name] = routePaths(vh), vh.GetDomains(), true
		}
	}
}

// routePaths are the paths of a virtual host's routes, whatever their kind of match.
func routePaths(vh *routev3.VirtualHost) []string {
	var paths []string
	for _, rt := range vh.GetRoutes() {
		m := rt.GetMatch()
		paths = append(paths, m.GetPrefix()+m.GetPath()+m.GetPathSeparatedPrefix()+m.GetSafeRegex().GetRegex())
	}
	return paths
}

// has reports whether the view holds a virtual host for domain with a route whose
// path is path; v.mu is held.
func (v *xdsView) has(domain, path string) bool {
	for name, domains := range v.domains {
		if slices.Contains(domains, domain) && slices.Contains(v.paths[name], path) {
			return true
		}
	}
	return false
}

// waitFor waits until the view has a route for path on domain and returns when it came;
// it fails the test after timeout or when the stream breaks.
func (v *xdsView) waitFor(t *testing.T, domain, path string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.After(timeout)
	for {
		v.mu.Lock()
		ok, err, changed := v.has(domain, path), v.err, v.changed
		v.mu.Unlock()
		switch {
		case ok:
			return time.Now()
		case err != nil:
			t.Fatalf("xDS stream: %v", err)
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("route %s%s not in the xDS view after %s", domain, path, timeout)
		}
	}
}
