package app

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/portico-dev/portico/internal/dag"
	"github.com/portico-dev/portico/internal/proxy"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
	"github.com/portico-dev/portico/internal/xds/xdstls"
)

type xdsPKI struct{ server, client xdstls.Files }

func generatePKI(t *testing.T) xdsPKI {
	t.Helper()
	dir := t.TempDir()
	if err := xdstls.Generate(dir, []string{"portico.portico-system.svc"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	return xdsPKI{
		server: xdstls.Files{CertFile: p(xdstls.ServerCertFile), KeyFile: p(xdstls.ServerKeyFile), CAFile: p(xdstls.CACertFile)},
		client: xdstls.Files{CertFile: p(xdstls.ClientCertFile), KeyFile: p(xdstls.ClientKeyFile), CAFile: p(xdstls.CACertFile)},
	}
}

// startXDS serves an empty configuration with opts and returns the server's address.
func startXDS(t *testing.T, ctx context.Context, opts ...grpc.ServerOption) string {
	t.Helper()
	srv := server.New(slog.New(slog.DiscardHandler), nil)
	res, err := translate.Translate(&dag.Graph{}, translate.Options{HTTPAddress: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Publish(ctx, res); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, opts...) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("xDS server: %v", err)
		}
	})
	return lis.Addr().String()
}

// startProxy runs a proxy against addr until the test ends.
func startProxy(t *testing.T, ctx context.Context, addr string, creds credentials.TransportCredentials) *proxy.Proxy {
	t.Helper()
	p := proxy.New(proxy.Config{
		XDSAddress:     addr,
		XDSCredentials: creds,
		ListenerAddrs:  map[string]string{translate.ListenerHTTP: "127.0.0.1:0"},
		Logger:         slog.New(slog.DiscardHandler),
	})
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("proxy: %v", err)
		}
	})
	return p
}

func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

func TestXDSOverMutualTLS(t *testing.T) {
	pki := generatePKI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // deferred calls run before the cleanups that wait for the goroutines

	serverCreds, err := xdstls.ServerCredentials(pki.server)
	if err != nil {
		t.Fatal(err)
	}
	addr := startXDS(t, ctx, grpc.Creds(serverCreds))

	clientCreds, err := xdstls.ClientCredentials(pki.client, "portico.portico-system.svc")
	if err != nil {
		t.Fatal(err)
	}
	secure := startProxy(t, ctx, addr, clientCreds)
	plain := startProxy(t, ctx, addr, nil)

	if !eventually(10*time.Second, secure.Ready) {
		t.Fatal("the proxy with a client certificate never became ready")
	}
	if secure.ListenerAddr(translate.ListenerHTTP) == "" {
		t.Error("the mTLS proxy has no bound HTTP listener")
	}
	if eventually(2*time.Second, plain.Ready) {
		t.Fatal("a plaintext proxy got configuration from the mTLS xDS server")
	}
}

func TestEmbeddedProxyCredentials(t *testing.T) {
	pki := generatePKI(t)

	if opts, creds, err := xdsCredentials(ServeOptions{}, nil); err != nil || opts != nil || creds != nil {
		t.Fatalf("without TLS: %v %v %v", opts, creds, err)
	}
	if _, _, err := xdsCredentials(ServeOptions{XDSTLS: xdstls.Files{CertFile: pki.server.CertFile}}, nil); err == nil || !strings.Contains(err.Error(), "--xds-tls-key-file") {
		t.Fatalf("partial TLS files: %v", err)
	}
	// certgen's server certificate is for server auth only: the embedded proxy
	// needs the client pair.
	if _, _, err := xdsCredentials(ServeOptions{XDSTLS: pki.server, EmbeddedProxy: true}, nil); err == nil || !strings.Contains(err.Error(), "--xds-tls-client-cert-file") {
		t.Fatalf("embedded proxy without a client certificate: %v", err)
	}

	opts, creds, err := xdsCredentials(ServeOptions{XDSTLS: pki.server, EmbeddedProxy: true,
		XDSTLSClientCertFile: pki.client.CertFile, XDSTLSClientKeyFile: pki.client.KeyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := startXDS(t, ctx, opts...)
	// Dial 127.0.0.1 although the certificate's first name is the Service's: the
	// embedded proxy verifies the name it was given, not the dialled host.
	p := startProxy(t, ctx, addr, creds)
	if !eventually(10*time.Second, p.Ready) {
		t.Fatal("the embedded proxy never became ready over mTLS")
	}
}
