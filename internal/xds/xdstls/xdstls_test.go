package xdstls

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func generate(t *testing.T) (dir string, server, client Files) {
	t.Helper()
	dir = t.TempDir()
	if err := Generate(dir, []string{"portico.portico-system.svc"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	return dir, Files{p(ServerCertFile), p(ServerKeyFile), p(CACertFile)}, Files{p(ClientCertFile), p(ClientKeyFile), p(CACertFile)}
}

func startServer(t *testing.T, f Files) string {
	t.Helper()
	creds, err := ServerCredentials(f)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func check(addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestGenerateWritesKeysPrivately(t *testing.T) {
	dir, _, _ := generate(t)
	for _, n := range []string{CACertFile, CAKeyFile, ServerCertFile, ServerKeyFile, ClientCertFile, ClientKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(n, ".key") && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", n, fi.Mode().Perm())
		}
	}
}

func TestMutualTLS(t *testing.T) {
	_, server, client := generate(t)
	addr := startServer(t, server)

	t.Run("client certificate accepted", func(t *testing.T) {
		creds, err := ClientCredentials(client, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := check(addr, creds); err != nil {
			t.Fatalf("mTLS call failed: %v", err)
		}
	})
	t.Run("server name in SANs", func(t *testing.T) {
		creds, err := ClientCredentials(client, "portico.portico-system.svc")
		if err != nil {
			t.Fatal(err)
		}
		if err := check(addr, creds); err != nil {
			t.Fatalf("mTLS call failed: %v", err)
		}
	})
	t.Run("wrong server name rejected", func(t *testing.T) {
		creds, err := ClientCredentials(client, "elsewhere.example")
		if err != nil {
			t.Fatal(err)
		}
		if err := check(addr, creds); err == nil {
			t.Fatal("call succeeded against a server certificate for another name")
		}
	})
	t.Run("no client certificate rejected", func(t *testing.T) {
		// A TLS client that trusts the CA but presents no certificate.
		pool, err := loadPool(client.CAFile)
		if err != nil {
			t.Fatal(err)
		}
		creds := credentials.NewClientTLSFromCert(pool, "")
		if err := check(addr, creds); err == nil {
			t.Fatal("call without a client certificate succeeded")
		}
	})
	t.Run("plaintext rejected", func(t *testing.T) {
		if err := check(addr, insecure.NewCredentials()); err == nil {
			t.Fatal("plaintext call succeeded")
		}
	})
	t.Run("certificate from another CA rejected", func(t *testing.T) {
		_, _, other := generate(t)
		// Trust the real server's CA, but present a certificate of another CA.
		other.CAFile = client.CAFile
		creds, err := ClientCredentials(other, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := check(addr, creds); err == nil {
			t.Fatal("call with a certificate from another CA succeeded")
		}
	})
}

func TestValidate(t *testing.T) {
	if err := (Files{}).Validate(); err != nil {
		t.Errorf("empty Files: %v", err)
	}
	if (Files{}).Enabled() {
		t.Error("empty Files enabled")
	}
	err := Files{CertFile: "a", KeyFile: "b"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "--xds-tls-ca-file") {
		t.Errorf("partial Files: %v", err)
	}
	if _, err := ServerCredentials(Files{}); err == nil {
		t.Error("ServerCredentials without files succeeded")
	}
}

func TestServerPicksUpRotatedCertificates(t *testing.T) {
	_, server, client := generate(t)
	addr := startServer(t, server)
	// Replace the whole PKI in place: old clients must fail, new ones succeed.
	if err := Generate(filepath.Dir(server.CertFile), nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	creds, err := ClientCredentials(client, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := check(addr, creds); err != nil {
		t.Fatalf("call with the rotated certificates failed: %v", err)
	}
}

// A running data plane (portico proxy with --xds-tls-*-file) reads its files again for
// every connection: after the whole PKI is replaced in place, CA bundle included, its
// next connection uses the new files.
func TestClientPicksUpRotatedCertificatesAndCA(t *testing.T) {
	_, server, client := generate(t)
	addr := startServer(t, server)
	creds, err := ClientCredentials(client, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := check(addr, creds); err != nil {
		t.Fatal(err)
	}
	if err := Generate(filepath.Dir(server.CertFile), nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := check(addr, creds); err != nil {
		t.Fatalf("the credentials made before the rotation failed after it: %v", err)
	}
}
