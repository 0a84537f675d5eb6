package proxy

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/portico-dev/portico/internal/proxy/listener"
)

// controlPlaneRoutingToA serves, as version v1, one HTTP listener whose every request
// goes to backend A.
func controlPlaneRoutingToA(t *testing.T) *controlPlane {
	t.Helper()
	cp := startControlPlane(t)
	res, _ := threeBackends(t)
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster("A", prefixMatch("/"))))}
	cp.set("v1", res)
	return cp
}

// proxyToOneBackend starts a proxy whose HTTP listener sends every request to the
// cluster name, one endpoint at addr, and waits until it serves.
func proxyToOneBackend(t *testing.T, name, addr string) *testProxy {
	t.Helper()
	cp := startControlPlane(t)
	var res resources
	res.clusters = append(res.clusters, edsCluster(name))
	res.endpoints = append(res.endpoints, assignment(name, addr))
	res.listeners = []*listenerv3.Listener{httpListener(t)}
	res.routes = []*routev3.RouteConfiguration{routeConfig("ingress_http", vhost("*", toCluster(name, prefixMatch("/"))))}
	cp.set("v1", res)
	p := startProxy(t, cp)
	p.waitVersion(t, "v1")
	return p
}

// TestRunFailsWhenAListenerCannotBindAtStartUp: a port taken by another process
// ends Run with an error that names the address and the cause, instead of a proxy
// that retries for ever and never becomes ready.
func TestRunFailsWhenAListenerCannotBindAtStartUp(t *testing.T) {
	t.Parallel()
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	addr := blocker.Addr().String()

	cp := controlPlaneRoutingToA(t)

	logs := &logCapture{}
	p := New(Config{
		XDSAddress:    cp.addr,
		NodeID:        testNode,
		ListenerAddrs: map[string]string{"ingress_http": addr},
		Logger:        slog.New(slog.NewJSONHandler(logs, nil)),
		BindGrace:     300 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil while its listener could not bind")
		}
		for _, want := range []string{addr, "ingress_http", "address already in use"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Run error %q does not mention %q", err, want)
			}
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run kept retrying a listener that cannot bind")
	}
	if p.Ready() {
		t.Error("ready although a listener never bound")
	}
}

// TestBindGraceNegativeRetriesForEver: with a negative grace the proxy waits for
// the address however long it takes, and serves once it is free.
func TestBindGraceNegativeRetriesForEver(t *testing.T) {
	t.Parallel()
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := blocker.Addr().String()

	cp := controlPlaneRoutingToA(t)
	p := New(Config{XDSAddress: cp.addr, NodeID: testNode, ListenerAddrs: map[string]string{"ingress_http": addr}, BindGrace: -1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitFor(t, "two failed binds", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v while retrying", err)
		default:
		}
		backoff, ok := p.listeners.RetryBackoff("ingress_http")
		return ok && backoff >= 2*listener.BindRetryMin
	})
	blocker.Close()
	waitFor(t, "ready once the address is free", p.Ready)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
