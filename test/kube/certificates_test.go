package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/app"
	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/managedtls"
	"github.com/portico-dev/portico/internal/testutil"
)

// TestServeRenewsCertificatesUnderTraffic runs serve with --managed-certificates on a
// non-loopback xDS address and the embedded proxy, moves the clock past the renewal of
// every certificate, and checks that the xDS server presents a new certificate, the
// client Secret holds a new one, and the proxy's stream was never dropped: a change
// made after the renewal reaches it, and it never logged a reconnect.
func TestServeRenewsCertificatesUnderTraffic(t *testing.T) {
	cfg := env.AdminConfig(t)
	c := kubetest.Clientset(t, cfg)
	ctx := context.Background()
	pn := kubetest.NewPodNetwork(t, 2)
	const ns = "managed-certificates"
	blueGreen(t, c, pn, ns, 9011)

	clock := testutil.NewClock(time.Now())
	var logs testutil.SyncBuffer
	ctl := startControllerWith(t, cfg, "certs", []string{ns}, func(o *app.ServeOptions) {
		o.XDSAddr = "0.0.0.0:0"
		o.ManagedTLS, o.CertificatesNamespace = true, ns
		o.ManagedTLSConfig = func(m *managedtls.Config) {
			m.Now, m.LeafValidity, m.Interval = clock.Now, 3*time.Hour, 100*time.Millisecond
		}
		o.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	eventually(t, 30*time.Second, "traffic to blue", func() bool {
		code, r := ctl.get(t, "web.test", "/")
		return code == 200 && r.Service == "blue"
	})
	_, port, _ := net.SplitHostPort(ctl.srv.XDSAddr())
	xds := "127.0.0.1:" + port
	clientSecret := func() *corev1.Secret {
		s, err := c.CoreV1().Secrets(ns).Get(ctx, managedtls.DefaultClientSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The certificate the xDS server presents to a data plane holding the client Secret.
	presented := func() *x509.Certificate {
		s := clientSecret()
		pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.Data["ca.crt"])
		conn, err := tls.Dial("tcp", xds, &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool,
			ServerName: "portico." + ns + ".svc", NextProtos: []string{"h2"}, Time: clock.Now, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatalf("a data plane with the client Secret: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	first, firstClient := presented(), clientSecret().Data[corev1.TLSCertKey]

	clock.Advance(2*time.Hour + 10*time.Minute)
	eventually(t, 30*time.Second, "the client Secret to be renewed", func() bool {
		return !bytes.Equal(clientSecret().Data[corev1.TLSCertKey], firstClient)
	})
	eventually(t, 30*time.Second, "the xDS server to present a renewed certificate", func() bool {
		return presented().SerialNumber.Cmp(first.SerialNumber) != 0
	})

	ing, err := c.NetworkingV1().Ingresses(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "green"
	if _, err := c.NetworkingV1().Ingresses(ns).Update(ctx, ing, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the change made after the renewal to reach the proxy", func() bool {
		code, r := ctl.get(t, "web.test", "/")
		return code == 200 && r.Service == "green"
	})
	if strings.Contains(logs.String(), "xDS stream ended") {
		t.Error("the embedded proxy's xDS stream was dropped across the renewal")
	}
	if !strings.Contains(logs.String(), `use=embedded-proxy`) {
		t.Error("the embedded proxy's own certificate was not issued (log line missing)")
	}
}
