package managedtls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/kubetest"
	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/testutil"
	"github.com/portico-dev/portico/internal/xds/xdstls"
)

// env is a real kube-apiserver (skipped under -short).
var env *kubetest.Env

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m, &env)) }

const serverName = "portico.test-ns.svc"

type fixture struct {
	t      *testing.T
	client kubernetes.Interface
	ns     string
	clock  *testutil.Clock
}

// fixtures counts the namespaces made, so that each test (and each run of it, with
// -count) has its own.
var fixtures atomic.Int64

func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	c := kubetest.Clientset(t, env.AdminConfig(t))
	ns := fmt.Sprintf("%s-%d", name, fixtures.Add(1))
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, client: c, ns: ns, clock: testutil.NewClock(time.Now())}
}

func (f *fixture) manager(mod func(*Config)) *Manager {
	f.t.Helper()
	cfg := Config{Client: f.client, Namespace: f.ns, XDSServerNames: []string{serverName}, Now: f.clock.Now}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func (f *fixture) reconcile(m *Manager) {
	f.t.Helper()
	if err := m.Reconcile(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	s, err := f.client.CoreV1().Secrets(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// dataPlaneConfig is what Envoy has: the client Secret as it is now, verified at the
// test clock's time.
func (f *fixture) dataPlaneConfig() *tls.Config {
	f.t.Helper()
	s := f.secret(DefaultClientSecret)
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		f.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data[BundleKey]) {
		f.t.Fatal("the client Secret's ca.crt holds no certificate")
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, Time: f.clock.Now, MinVersion: tls.VersionTLS12}
}

// serve starts a gRPC health server with m's server credentials.
func serve(t *testing.T, m *Manager) (string, *health.Server) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(m.ServerCredentials()))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), hs
}

func call(addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func fixed(cfg *tls.Config) credentials.TransportCredentials {
	return xdstls.DynamicClientCredentials(serverName, func() (*tls.Config, error) { return cfg.Clone(), nil })
}

// serverCertificate returns the certificate the server presents now.
func serverCertificate(t *testing.T, addr string, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName, cfg.NextProtos = serverName, []string{"h2"}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// stream is a long-lived gRPC stream, as Envoy's ADS stream is.
type stream struct {
	conn    *grpc.ClientConn
	updates chan healthpb.HealthCheckResponse_ServingStatus
}

func openStream(t *testing.T, addr string, creds credentials.TransportCredentials) *stream {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); conn.Close() })
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{Service: "xds"})
	if err != nil {
		t.Fatal(err)
	}
	// A Watch answers at once with the service's current status (SERVICE_UNKNOWN, or
	// what a SetServingStatus that raced ahead set): take it, so that expect sees only
	// the updates that follow.
	if _, err := w.Recv(); err != nil {
		t.Fatalf("the stream's first message: %v", err)
	}
	s := &stream{conn: conn, updates: make(chan healthpb.HealthCheckResponse_ServingStatus, 16)}
	go func() {
		defer close(s.updates)
		for {
			resp, err := w.Recv()
			if err != nil {
				return
			}
			s.updates <- resp.Status
		}
	}()
	return s
}

// expect waits for the stream's next update to be want: the stream is still the one
// opened before (a reconnected stream would not deliver it without a new Watch).
func (s *stream) expect(t *testing.T, hs *health.Server, want healthpb.HealthCheckResponse_ServingStatus) {
	t.Helper()
	hs.SetServingStatus("xds", want)
	select {
	case got, ok := <-s.updates:
		if !ok {
			t.Fatal("the stream ended")
		}
		if got != want {
			t.Fatalf("stream update %v, want %v", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no update on the stream within 30s")
	}
}

func TestFirstStartIssuesEverything(t *testing.T) {
	f := newFixture(t, "first-start")
	reg := prometheus.NewRegistry()
	m := f.manager(func(c *Config) { c.Registerer = reg })
	if m.Ready() {
		t.Fatal("ready before any certificate was issued")
	}
	addr, _ := serve(t, m)
	if err := call(addr, fixed(&tls.Config{InsecureSkipVerify: true})); err == nil {
		t.Fatal("the server answered before it had a certificate")
	}
	f.reconcile(m)
	if !m.Ready() {
		t.Fatal("not ready after a successful reconcile")
	}

	ca := f.secret(DefaultCASecret)
	for _, k := range []string{BundleKey, SignerCertKey, SignerKeyKey} {
		if len(ca.Data[k]) == 0 {
			t.Errorf("CA Secret has no %s", k)
		}
	}
	client := f.secret(DefaultClientSecret)
	if client.Type != corev1.SecretTypeTLS {
		t.Errorf("client Secret type %q, want %q", client.Type, corev1.SecretTypeTLS)
	}
	if _, ok := client.Data[SignerKeyKey]; ok && bytes.Equal(client.Data[SignerKeyKey], ca.Data[SignerKeyKey]) {
		t.Fatal("the client Secret holds the CA's key")
	}
	if !bytes.Equal(client.Data[BundleKey], ca.Data[BundleKey]) {
		t.Error("the client Secret's ca.crt is not the trust bundle")
	}

	t.Run("the issued client certificate is served", func(t *testing.T) {
		if err := call(addr, fixed(f.dataPlaneConfig())); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the embedded proxy's certificate is served", func(t *testing.T) {
		if err := call(addr, m.ClientCredentials(serverName)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no client certificate is refused", func(t *testing.T) {
		cfg := f.dataPlaneConfig()
		cfg.Certificates = nil
		if err := call(addr, fixed(cfg)); err == nil {
			t.Fatal("served a client without a certificate")
		}
	})
	t.Run("a certificate from another CA is refused", func(t *testing.T) {
		other, err := pki.NewCA("other", time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		l, err := other.Issue("intruder", nil, pki.ClientAuth, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, _ := l.TLSCertificate()
		cfg := f.dataPlaneConfig()
		cfg.Certificates = []tls.Certificate{*pair}
		if err := call(addr, fixed(cfg)); err == nil {
			t.Fatal("served a client certificate from another CA")
		}
	})
	t.Run("the server is verified by name", func(t *testing.T) {
		cfg := f.dataPlaneConfig()
		creds := xdstls.DynamicClientCredentials("elsewhere.test", func() (*tls.Config, error) { return cfg.Clone(), nil })
		if err := call(addr, creds); err == nil {
			t.Fatal("the server's certificate passed for another name")
		}
	})
	t.Run("expiry metrics", func(t *testing.T) {
		if n := promtestutil.CollectAndCount(reg, "portico_certificate_expiry_timestamp_seconds"); n != 4 {
			t.Errorf("%d expiry series, want 4 (ca, xds-server, xds-client, embedded-proxy)", n)
		}
	})

	t.Run("a second reconcile changes nothing", func(t *testing.T) {
		f.reconcile(m)
		if got := f.secret(DefaultCASecret); got.ResourceVersion != ca.ResourceVersion {
			t.Error("the CA Secret was written again")
		}
		if got := f.secret(DefaultClientSecret); got.ResourceVersion != client.ResourceVersion {
			t.Error("the client Secret was written again")
		}
	})
}

func TestReplicasShareOneAuthority(t *testing.T) {
	f := newFixture(t, "replicas")
	a, b := f.manager(nil), f.manager(nil)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, m := range []*Manager{a, b} {
		wg.Go(func() {
			// A replica that lost a race retries, as Run does.
			for try := 0; try < 5; try++ {
				if errs[i] = m.Reconcile(t.Context()); errs[i] == nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Both see the final Secrets.
	f.reconcile(a)
	f.reconcile(b)
	if !bytes.Equal(a.TrustBundle(), b.TrustBundle()) {
		t.Fatal("the replicas trust different bundles")
	}
	addrA, _ := serve(t, a)
	addrB, _ := serve(t, b)
	for _, addr := range []string{addrA, addrB} {
		if err := call(addr, fixed(f.dataPlaneConfig())); err != nil {
			t.Errorf("%s: the shared client certificate is refused: %v", addr, err)
		}
		for _, m := range []*Manager{a, b} {
			if err := call(addr, m.ClientCredentials(serverName)); err != nil {
				t.Errorf("%s: an embedded proxy's certificate is refused: %v", addr, err)
			}
		}
	}
}

func TestLeafRenewalKeepsStreams(t *testing.T) {
	f := newFixture(t, "leaf-renewal")
	m := f.manager(func(c *Config) { c.LeafValidity = 3 * time.Hour })
	f.reconcile(m)
	addr, hs := serve(t, m)
	before := f.dataPlaneConfig()
	firstServer := serverCertificate(t, addr, before)
	s := openStream(t, addr, fixed(before))
	s.expect(t, hs, healthpb.HealthCheckResponse_SERVING)
	oldClient := f.secret(DefaultClientSecret)

	// Not yet due: nothing changes.
	f.clock.Advance(time.Hour)
	f.reconcile(m)
	if f.secret(DefaultClientSecret).ResourceVersion != oldClient.ResourceVersion {
		t.Fatal("the client certificate was renewed with two thirds of its life left")
	}

	// Less than a third left: everything is issued again.
	f.clock.Advance(time.Hour + 10*time.Minute)
	f.reconcile(m)
	after := f.dataPlaneConfig()
	if bytes.Equal(after.Certificates[0].Certificate[0], before.Certificates[0].Certificate[0]) {
		t.Fatal("the client certificate was not renewed with less than a third of its life left")
	}
	if cert := serverCertificate(t, addr, after); cert.SerialNumber.Cmp(firstServer.SerialNumber) == 0 {
		t.Fatal("the server still presents its first certificate")
	}
	// The stream opened before the renewal is still up.
	s.expect(t, hs, healthpb.HealthCheckResponse_NOT_SERVING)
	// New connections work with the new certificate, and with the old one until it expires.
	if err := call(addr, fixed(after)); err != nil {
		t.Fatalf("the renewed client certificate is refused: %v", err)
	}
	if err := call(addr, fixed(before)); err != nil {
		t.Fatalf("the previous client certificate is refused before it expires: %v", err)
	}
	f.clock.Advance(2 * time.Hour)
	if err := call(addr, fixed(before)); err == nil {
		t.Fatal("an expired client certificate is served")
	}
}

func TestAuthorityRotation(t *testing.T) {
	f := newFixture(t, "ca-rotation")
	const day = 24 * time.Hour
	m := f.manager(func(c *Config) {
		c.CAValidity, c.LeafValidity, c.Promotion = 30*day, 3*day, day
		c.WebhookServerNames = []string{"portico-webhook.ca-rotation.svc"}
		c.WebhookConfiguration = "portico-" + f.ns
	})
	vwcs := f.client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	none := admissionregistrationv1.SideEffectClassNone
	path := "/validate"
	if _, err := vwcs.Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "portico-" + f.ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validate.portico.dev",
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &none,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: f.ns, Name: "portico-webhook", Path: &path}},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vwcs.Delete(context.Background(), "portico-"+f.ns, metav1.DeleteOptions{}) })
	caBundle := func() []byte {
		v, err := vwcs.Get(t.Context(), "portico-"+f.ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return v.Webhooks[0].ClientConfig.CABundle
	}
	trusted := func() int {
		certs, err := pki.ParseBundle(f.secret(DefaultCASecret).Data[BundleKey])
		if err != nil {
			t.Fatal(err)
		}
		return len(certs)
	}

	f.reconcile(m)
	addr, hs := serve(t, m)
	first := f.dataPlaneConfig()
	firstCA := f.secret(DefaultCASecret).Data[SignerCertKey]
	s := openStream(t, addr, fixed(first))
	s.expect(t, hs, healthpb.HealthCheckResponse_SERVING)
	if !bytes.Equal(caBundle(), m.TrustBundle()) {
		t.Fatal("the webhook configuration's caBundle is not the trust bundle")
	}

	// Renew leaves as they fall due, up to the CA's last third.
	for range 9 {
		f.clock.Advance(2 * day)
		f.reconcile(m)
	}
	if n := trusted(); n != 1 {
		t.Fatalf("%d CAs trusted with 12 days of 30 left, want 1", n)
	}
	f.clock.Advance(2*day + time.Hour) // the CA has less than 10 days left
	f.reconcile(m)
	if n := trusted(); n != 2 {
		t.Fatalf("%d CAs trusted once the CA is due, want 2 (it and its successor)", n)
	}
	if !bytes.Equal(f.secret(DefaultCASecret).Data[SignerCertKey], firstCA) {
		t.Fatal("the successor signs before the bundle can have reached the data planes")
	}
	if !bytes.Equal(caBundle(), m.TrustBundle()) || !bytes.Equal(f.secret(DefaultClientSecret).Data[BundleKey], m.TrustBundle()) {
		t.Fatal("the new trust bundle was not given to the webhook configuration and the data planes")
	}
	beforePromotion := f.dataPlaneConfig()

	f.clock.Advance(day + time.Minute)
	f.reconcile(m)
	ca := f.secret(DefaultCASecret)
	if bytes.Equal(ca.Data[SignerCertKey], firstCA) || len(ca.Data[NextCertKey]) != 0 {
		t.Fatal("the successor does not sign a day after it was trusted")
	}
	signer, err := pki.ParseCA(ca.Data[SignerCertKey], ca.Data[SignerKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	after := f.dataPlaneConfig()
	clientLeaf, _ := x509.ParseCertificate(after.Certificates[0].Certificate[0])
	if clientLeaf.CheckSignatureFrom(signer.Cert) != nil {
		t.Fatal("the client certificate was not issued again by the new CA")
	}
	if serverCertificate(t, addr, after).CheckSignatureFrom(signer.Cert) != nil {
		t.Fatal("the server certificate was not issued again by the new CA")
	}
	s.expect(t, hs, healthpb.HealthCheckResponse_NOT_SERVING)
	if err := call(addr, fixed(after)); err != nil {
		t.Fatalf("a certificate of the new CA is refused: %v", err)
	}
	if err := call(addr, fixed(beforePromotion)); err != nil {
		t.Fatalf("a certificate of the old CA is refused while it is valid: %v", err)
	}
	hookCfg := &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "portico-webhook.ca-rotation.svc", Time: f.clock.Now}
	hookCfg.RootCAs.AppendCertsFromPEM(caBundle())
	hook, err := m.WebhookCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Leaf.Verify(x509.VerifyOptions{Roots: hookCfg.RootCAs, DNSName: hookCfg.ServerName, CurrentTime: f.clock.Now()}); err != nil {
		t.Fatalf("the webhook certificate does not verify against the caBundle: %v", err)
	}

	// Once the first CA has expired it is no longer trusted.
	f.clock.Advance(9 * day)
	f.reconcile(m)
	if n := trusted(); n != 1 {
		t.Fatalf("%d CAs trusted after the first expired, want 1", n)
	}
	s.expect(t, hs, healthpb.HealthCheckResponse_SERVING)
}

func TestUnreadableAuthorityIsReplaced(t *testing.T) {
	f := newFixture(t, "unreadable-ca")
	if _, err := f.client.CoreV1().Secrets(f.ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultCASecret},
		Data:       map[string][]byte{SignerCertKey: []byte("not a certificate")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m := f.manager(nil)
	f.reconcile(m)
	ca := f.secret(DefaultCASecret)
	if _, err := pki.ParseCA(ca.Data[SignerCertKey], ca.Data[SignerKeyKey]); err != nil {
		t.Fatalf("the CA Secret was not replaced: %v", err)
	}
	// What was there is kept aside, not destroyed.
	all, err := f.client.CoreV1().Secrets(f.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, s := range all.Items {
		if strings.HasPrefix(s.Name, DefaultCASecret+"-unreadable-") && string(s.Data[SignerCertKey]) == "not a certificate" {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("%d copies of the unreadable CA Secret kept, want 1", kept)
	}
	addr, _ := serve(t, m)
	if err := call(addr, fixed(f.dataPlaneConfig())); err != nil {
		t.Fatal(err)
	}
}

func TestForbiddenSaysWhichPermission(t *testing.T) {
	f := newFixture(t, "forbidden")
	admin := f.client
	if _, err := admin.CoreV1().ServiceAccounts(f.ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(f.ns).CreateToken(t.Context(), "nobody", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.client = kubetest.Clientset(t, env.TokenConfig(tr.Status.Token))
	err = f.manager(nil).Reconcile(t.Context())
	if err == nil || !strings.Contains(err.Error(), "portico-certificates") || !strings.Contains(err.Error(), f.ns) {
		t.Fatalf("error %v, want one naming the Role portico-certificates and the namespace", err)
	}
}

// A successor that cannot be read (a hand edit left next.crt without next.key) costs
// only the successor: the signing CA and its key stay, and nothing is reissued.
func TestUnreadableSuccessorIsDropped(t *testing.T) {
	f := newFixture(t, "unreadable-successor")
	m := f.manager(nil)
	f.reconcile(m)
	ca := f.secret(DefaultCASecret)
	client := f.secret(DefaultClientSecret)
	edited := ca.DeepCopy()
	edited.Data[NextCertKey] = ca.Data[SignerCertKey]
	if _, err := f.client.CoreV1().Secrets(f.ns).Update(t.Context(), edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcile(m)
	after := f.secret(DefaultCASecret)
	if !bytes.Equal(after.Data[SignerKeyKey], ca.Data[SignerKeyKey]) {
		t.Fatal("the signing CA was replaced because its successor could not be read")
	}
	if _, ok := after.Data[NextCertKey]; ok {
		t.Error("the unreadable successor is still in the CA Secret")
	}
	if f.secret(DefaultClientSecret).ResourceVersion != client.ResourceVersion {
		t.Error("the client certificate was reissued")
	}
}

// A replica that read the authority before another replaced it does not write
// certificates or a trust bundle of the old one (a deleted, perhaps leaked, CA).
func TestStaleAuthorityIsNotWritten(t *testing.T) {
	f := newFixture(t, "stale-authority")
	a, b := f.manager(nil), f.manager(nil)
	f.reconcile(a)
	stale, err := a.reconcileAuthority(t.Context(), f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The operator starts over; replica b makes a new authority and client certificate.
	if err := f.client.CoreV1().Secrets(f.ns).Delete(t.Context(), DefaultCASecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.reconcile(b)
	fresh := f.secret(DefaultClientSecret)
	if err := a.reconcileClientSecret(t.Context(), stale, f.clock.Now()); !errors.Is(err, errRaced) {
		t.Fatalf("writing the client Secret from a replaced authority: %v, want errRaced", err)
	}
	if got := f.secret(DefaultClientSecret); got.ResourceVersion != fresh.ResourceVersion {
		t.Fatal("the client Secret was overwritten with a certificate of the deleted CA")
	}
	// Its next check adopts the new authority.
	f.reconcile(a)
	if !bytes.Equal(a.TrustBundle(), b.TrustBundle()) {
		t.Fatal("the replica that lost the race does not trust the new authority")
	}
}

// Replicas whose clocks are minutes apart leave each other's certificates alone: the
// one behind sees certificates valid from a little later, which are not due.
func TestReplicaClocksMinutesApart(t *testing.T) {
	f := newFixture(t, "clock-skew")
	ahead := f.manager(nil)
	f.reconcile(ahead)
	ca, client := f.secret(DefaultCASecret), f.secret(DefaultClientSecret)
	behindClock := testutil.NewClock(f.clock.Now().Add(-10 * time.Minute))
	behind := f.manager(func(c *Config) { c.Now = behindClock.Now })
	f.reconcile(behind)
	f.reconcile(behind)
	if f.secret(DefaultCASecret).ResourceVersion != ca.ResourceVersion {
		t.Error("the replica behind rotated the CA the one ahead made")
	}
	if f.secret(DefaultClientSecret).ResourceVersion != client.ResourceVersion {
		t.Error("the replica behind reissued the client certificate the one ahead made")
	}
}

// TestClientSecretIsCopiedWhereDataPlanesRun: the Gateways' data planes run in a
// namespace of their own and mount the client certificate there. The copy follows
// renewals; a copy namespace that does not exist yet delays only the copy (the
// controller's own certificates are issued, Reconcile reports the namespace), and the
// copy appears once it does.
func TestClientSecretIsCopiedWhereDataPlanesRun(t *testing.T) {
	env.Require(t)
	f := newFixture(t, "client-copies")
	gateways := f.ns + "-gateways"
	m := f.manager(func(c *Config) {
		c.LeafValidity = 3 * time.Hour
		c.ClientSecretNamespaces = []string{gateways}
	})
	err := m.Reconcile(t.Context())
	if err == nil || !strings.Contains(err.Error(), gateways) {
		t.Fatalf("Reconcile with the copy's namespace missing = %v, want an error naming %s", err, gateways)
	}
	if !m.Ready() {
		t.Fatal("a missing copy namespace kept the controller's own certificates from being issued")
	}
	if _, err := f.client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: gateways}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	copyData := func() map[string][]byte {
		t.Helper()
		s, err := f.client.CoreV1().Secrets(gateways).Get(t.Context(), DefaultClientSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data
	}
	f.reconcile(m)
	if got, want := copyData(), f.secret(DefaultClientSecret).Data; !sameData(got, want) {
		t.Fatal("the copy differs from the client Secret")
	}
	before := copyData()
	f.clock.Advance(2*time.Hour + 10*time.Minute) // less than a third of the 3 h life left
	f.reconcile(m)
	after := copyData()
	if sameData(before, after) {
		t.Error("the copy kept the old certificate after a renewal")
	}
	if !sameData(after, f.secret(DefaultClientSecret).Data) {
		t.Error("after the renewal the copy differs from the client Secret")
	}
}
