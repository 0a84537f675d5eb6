// Package managedtls keeps the certificates of `portico serve`'s own connections, so
// that an install secures them with no certificate step and no restart:
//
//   - a certificate authority in a Secret (CASecret: the signing CA, a successor while
//     the authority is being rotated, and the bundle of every CA still trusted);
//   - the data planes' client certificate in a Secret that Envoy mounts (ClientSecret:
//     tls.crt, tls.key and the trust bundle as ca.crt);
//   - in memory, per replica: the xDS server's certificate, the embedded proxy's client
//     certificate and the admission webhook's serving certificate;
//   - the caBundle of the ValidatingWebhookConfiguration, kept equal to the trust bundle.
//
// Every replica runs a Manager. Secrets are created if absent and replaced with
// optimistic concurrency, so replicas never need to agree on anything else: whichever
// writes first wins, and the others read what it wrote.
//
// Each certificate is renewed when a third of its lifetime is left (pki.DueForRenewal).
// The authority rotates with an overlap: a successor CA joins the trust bundle first and
// signs nothing until Promotion has passed, long enough for every mounted copy of the
// bundle to be updated; then it signs, every leaf is issued again from it, and the old
// CA stays trusted until it expires, so that certificates it issued keep working.
// Connections already established are never touched: TLS checks certificates only at
// the handshake, and the gRPC streams of Envoy and the embedded proxy stay up.
package managedtls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/xds/xdstls"
)

// Keys of the CA Secret.
const (
	// BundleKey holds every CA certificate that is trusted: the signer, its successor
	// while there is one, and predecessors until they expire.
	BundleKey = "ca.crt"
	// SignerCertKey and SignerKeyKey hold the CA that signs.
	SignerCertKey = "tls.crt"
	SignerKeyKey  = "tls.key"
	// NextCertKey and NextKeyKey hold the successor CA during a rotation.
	NextCertKey = "next.crt"
	NextKeyKey  = "next.key"
)

// Defaults of Config.
const (
	DefaultCASecret     = "portico-ca"
	DefaultClientSecret = "portico-xds-client"
	DefaultCAValidity   = 5 * 365 * 24 * time.Hour
	DefaultLeafValidity = 90 * 24 * time.Hour
	// DefaultPromotion leaves a day between a successor CA joining the trust bundle and
	// signing: the kubelet updates mounted Secrets within minutes, Envoy reloads them at
	// once, and a day also covers a node that was briefly unreachable.
	DefaultPromotion = 24 * time.Hour
	DefaultInterval  = time.Minute
)

// Config configures a Manager.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	// CASecret and ClientSecret name the Secrets (defaults DefaultCASecret and
	// DefaultClientSecret).
	CASecret, ClientSecret string
	// ClientSecretNamespaces are further namespaces that get a copy of ClientSecret:
	// where data planes run that mount it (a Secret cannot be mounted from another
	// namespace), such as the namespace of the Gateways' data planes.
	ClientSecretNamespaces []string
	// XDSServerNames are the DNS names (or IPs) the data planes dial the xDS server by.
	XDSServerNames []string
	// WebhookServerNames, when set, are the names of the admission webhook's serving
	// certificate (the API server calls <service>.<namespace>.svc).
	WebhookServerNames []string
	// WebhookConfiguration, when set, names the ValidatingWebhookConfiguration whose
	// caBundle is kept equal to the trust bundle.
	WebhookConfiguration string
	// CAValidity and LeafValidity are the lifetimes of new certificates; Promotion is
	// how long a successor CA is trusted before it signs (defaults above).
	CAValidity, LeafValidity, Promotion time.Duration
	// Interval is the time between checks (default DefaultInterval); a failed check is
	// retried sooner.
	Interval time.Duration
	// Now is the clock (default time.Now). TLS verification by the Manager's
	// credentials uses it too, so tests can move through certificate lifetimes.
	Now func() time.Time
	// Registerer, when set, receives portico_certificate_expiry_timestamp_seconds.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.CASecret, DefaultCASecret)
	def(&c.ClientSecret, DefaultClientSecret)
	durDef := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	durDef(&c.CAValidity, DefaultCAValidity)
	durDef(&c.LeafValidity, DefaultLeafValidity)
	durDef(&c.Promotion, DefaultPromotion)
	durDef(&c.Interval, DefaultInterval)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Manager issues, stores and renews the certificates; see the package documentation.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	expiry *prometheus.GaugeVec // nil without a Registerer

	cur atomic.Pointer[material]
	// issued is closed once the first certificates are (see WaitReady).
	issued     chan struct{}
	issuedOnce sync.Once

	// mu serialises Reconcile; the leaves below are this replica's own.
	mu                   sync.Mutex
	server, client, hook *leaf
	// clientData is ClientSecret's data, as last written or read, for its copies.
	clientData map[string][]byte
	// dataPlane is the certificate in ClientSecret, as last written or read.
	dataPlane *x509.Certificate
	// webhookNote is the last webhook configuration problem logged, logged once.
	webhookNote string
}

// material is what the credentials serve, replaced whole at each change.
type material struct {
	pool   *x509.CertPool
	bundle []byte
	server *tls.Certificate
	client *tls.Certificate
	hook   *tls.Certificate // nil without WebhookServerNames
}

// leaf is an issued certificate and its tls form.
type leaf struct {
	*pki.Leaf
	pair *tls.Certificate
}

// New returns a Manager; nothing is read or issued before Reconcile or Run.
func New(cfg Config) (*Manager, error) {
	cfg = cfg.withDefaults()
	if cfg.Client == nil || cfg.Namespace == "" {
		return nil, errors.New("managedtls: a client and a namespace are required")
	}
	if len(cfg.XDSServerNames) == 0 {
		return nil, errors.New("managedtls: the xDS server needs at least one name")
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.With("component", "certificates"), issued: make(chan struct{})}
	if cfg.Registerer != nil {
		m.expiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portico_certificate_expiry_timestamp_seconds",
			Help: "When each certificate Portico manages for itself expires (Unix time), by use: ca, xds-server, xds-client (the Secret Envoy mounts), embedded-proxy, webhook.",
		}, []string{"use"})
		if err := cfg.Registerer.Register(m.expiry); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Ready reports whether certificates have been issued, so that the credentials serve.
func (m *Manager) Ready() bool { return m.cur.Load() != nil }

// WaitReady returns once certificates have been issued, or ctx's error when it ends
// first: a client started before then would only be refused and retry.
func (m *Manager) WaitReady(ctx context.Context) error {
	select {
	case <-m.issued:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run checks the certificates now and every Interval until ctx ends, retrying failed
// checks with backoff (1 s doubling to Interval), and at once after losing a race with
// another replica. It returns nil when ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		wait := m.cfg.Interval
		err := m.Reconcile(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errRaced):
			// Another replica wrote first: what it wrote is read at once.
			m.log.Debug("another replica changed the certificates at the same time; checking again", "err", err)
			wait = raceRetry
		case err != nil && m.Ready():
			m.log.Error("cannot renew Portico's own certificates; the current ones keep being served, and renewal is retried", "namespace", m.cfg.Namespace, "err", err)
			wait, backoff = backoff, min(backoff*2, m.cfg.Interval)
		case err != nil:
			m.log.Error("cannot issue Portico's own certificates; data planes that connect now are refused until this succeeds", "namespace", m.cfg.Namespace, "err", err)
			wait, backoff = backoff, min(backoff*2, m.cfg.Interval)
		default:
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// errRaced marks a write that lost to another replica's (a conflict, or a Secret
// created meanwhile): nothing is wrong, the next check reads what the other wrote.
var errRaced = errors.New("another replica wrote first")

// raceRetry is how soon a check that lost a race runs again.
const raceRetry = 200 * time.Millisecond

// Reconcile brings every certificate up to date once: the authority, the client
// Secret, this replica's own certificates, and the webhook configuration's caBundle.
func (m *Manager) Reconcile(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	auth, err := m.reconcileAuthority(ctx, now)
	if err != nil {
		return err
	}
	if err := m.reconcileClientSecret(ctx, auth, now); err != nil {
		return err
	}
	if err := m.renewOwn(auth, now); err != nil {
		return err
	}
	mat := &material{pool: pki.Pool(auth.trust), bundle: auth.bundle, server: m.server.pair, client: m.client.pair}
	if m.hook != nil {
		mat.hook = m.hook.pair
	}
	m.cur.Store(mat)
	m.issuedOnce.Do(func() { close(m.issued) })
	m.reconcileWebhookConfiguration(ctx, auth)
	m.recordExpiry(auth)
	return m.copyClientSecret(ctx, auth)
}

// authority is the CA Secret as it stands after a reconcile.
type authority struct {
	signer *pki.CA
	next   *pki.CA // nil outside a rotation
	trust  []*x509.Certificate
	bundle []byte
	// version is the CA Secret's resourceVersion this was read from or written as.
	version string
	// successorProblem says why the Secret's successor CA was dropped (nil: it was not).
	successorProblem error
}

// reconcileAuthority reads the CA Secret, creating it on first start, and moves the
// rotation on: promotes a successor whose time has come, starts a rotation when the
// signer is due, and drops expired CAs from the bundle.
func (m *Manager) reconcileAuthority(ctx context.Context, now time.Time) (*authority, error) {
	secrets := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace)
	sec, err := secrets.Get(ctx, m.cfg.CASecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return m.createAuthority(ctx, now)
	}
	if err != nil {
		return nil, m.explain(err, "read", m.cfg.CASecret)
	}
	cur, problem := parseAuthority(sec.Data)
	if cur.successorProblem != nil {
		m.log.Warn("the successor CA in the CA Secret cannot be read; it is dropped, and a new one is made when the CA is due", "secret", m.cfg.Namespace+"/"+m.cfg.CASecret, "err", cur.successorProblem)
	}
	if problem != nil {
		// Nothing can sign until it is replaced; a new authority costs data planes one
		// reconnect once their mounted Secret is updated, which beats never serving.
		// What was there is kept aside first: it may be a hand edit gone wrong.
		backup, err := m.backUp(ctx, sec)
		if err != nil {
			return nil, err
		}
		m.log.Error("the CA Secret's signing CA cannot be read; replacing it with a new certificate authority (its data is kept in the Secret named here)",
			"secret", m.cfg.Namespace+"/"+m.cfg.CASecret, "kept_in", backup, "err", problem)
		if cur, err = m.newAuthority(now); err != nil {
			return nil, err
		}
	}
	cur.version = sec.ResourceVersion
	next, changed, err := m.advance(cur, now)
	if err != nil {
		return nil, err
	}
	if !changed && problem == nil && cur.successorProblem == nil {
		return cur, nil
	}
	sec = sec.DeepCopy()
	sec.Data = next.data()
	updated, err := secrets.Update(ctx, sec, metav1.UpdateOptions{})
	if err != nil {
		return nil, m.explain(err, "update", m.cfg.CASecret)
	}
	next.version = updated.ResourceVersion
	return next, nil
}

// backUp copies an unreadable CA Secret's data to a new Secret, and returns its name.
func (m *Manager) backUp(ctx context.Context, sec *corev1.Secret) (string, error) {
	kept := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{GenerateName: m.cfg.CASecret + "-unreadable-", Namespace: m.cfg.Namespace, Labels: labels()},
		Type:       corev1.SecretTypeOpaque,
		Data:       sec.Data,
	}
	created, err := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace).Create(ctx, kept, metav1.CreateOptions{})
	if err != nil {
		return "", m.explain(err, "create", kept.GenerateName+"...")
	}
	return m.cfg.Namespace + "/" + created.Name, nil
}

// createAuthority creates the CA Secret, or reads the one another replica created first.
func (m *Manager) createAuthority(ctx context.Context, now time.Time) (*authority, error) {
	auth, err := m.newAuthority(now)
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.cfg.CASecret, Namespace: m.cfg.Namespace, Labels: labels()},
		Type:       corev1.SecretTypeOpaque,
		Data:       auth.data(),
	}
	created, err := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace).Create(ctx, sec, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return m.reconcileAuthority(ctx, now)
	case err != nil:
		return nil, m.explain(err, "create", m.cfg.CASecret)
	}
	auth.version = created.ResourceVersion
	m.log.Info("created a certificate authority for xDS and the webhook", "secret", m.cfg.Namespace+"/"+m.cfg.CASecret, "not_after", auth.signer.Cert.NotAfter)
	return auth, nil
}

func (m *Manager) newAuthority(now time.Time) (*authority, error) {
	ca, err := pki.NewCA(caName(now), now, m.cfg.CAValidity)
	if err != nil {
		return nil, err
	}
	return withTrust(ca, nil, nil, now), nil
}

// advance returns the authority at now, and whether it differs from cur.
func (m *Manager) advance(cur *authority, now time.Time) (*authority, bool, error) {
	signer, next := cur.signer, cur.next
	if unusable(signer.Cert, now) {
		// Nothing it signs would be valid (a controller that did not run for longer
		// than the CA's last third, or a clock far off when it was made): sign with a
		// new CA at once.
		if next == nil {
			var err error
			if next, err = pki.NewCA(caName(now), now, m.cfg.CAValidity); err != nil {
				return nil, false, err
			}
		}
		m.log.Warn("the certificate authority has expired or is not valid yet (a clock was far off); its successor signs at once, and data planes reconnect once their mounted Secret is updated",
			"not_before", signer.Cert.NotBefore, "not_after", signer.Cert.NotAfter)
		signer, next = next, nil
	}
	if next != nil && !now.Before(next.Cert.NotBefore.Add(pki.Backdate+m.cfg.Promotion)) {
		m.log.Info("the successor certificate authority signs from now on; certificates are issued again from it", "not_after", next.Cert.NotAfter)
		signer, next = next, nil
	}
	if next == nil && pki.DueForRenewal(signer.Cert, now) {
		ca, err := pki.NewCA(caName(now), now, m.cfg.CAValidity)
		if err != nil {
			return nil, false, err
		}
		m.log.Info("the certificate authority is due for renewal; its successor is trusted from now on and signs once the trust bundle has reached every data plane",
			"signer_not_after", signer.Cert.NotAfter, "successor_signs_after", m.cfg.Promotion)
		next = ca
	}
	out := withTrust(signer, next, cur.trust, now)
	changed := out.signer != cur.signer || out.next != cur.next || !bytes.Equal(out.bundle, cur.bundle)
	return out, changed, nil
}

// withTrust is the authority of signer and next, trusting them and those of earlier
// that have not expired at now, oldest first.
func withTrust(signer, next *pki.CA, earlier []*x509.Certificate, now time.Time) *authority {
	trust := slices.Clone(earlier)
	trust = append(trust, signer.Cert)
	if next != nil {
		trust = append(trust, next.Cert)
	}
	trust = slices.DeleteFunc(trust, func(c *x509.Certificate) bool { return !c.IsCA || now.After(c.NotAfter) })
	slices.SortStableFunc(trust, func(a, b *x509.Certificate) int { return a.NotBefore.Compare(b.NotBefore) })
	trust = slices.CompactFunc(trust, func(a, b *x509.Certificate) bool { return a.Equal(b) })
	return &authority{signer: signer, next: next, trust: trust, bundle: pki.EncodeBundle(trust)}
}

// parseAuthority reads the CA Secret's data. Only an unreadable signer is an error:
// an unreadable successor is dropped (successorProblem says why; another is made when
// due), and an unreadable bundle is rebuilt from the signer and its successor by advance.
func parseAuthority(data map[string][]byte) (*authority, error) {
	auth := &authority{bundle: data[BundleKey]}
	var err error
	if auth.signer, err = pki.ParseCA(data[SignerCertKey], data[SignerKeyKey]); err != nil {
		return auth, fmt.Errorf("%s/%s: %w", SignerCertKey, SignerKeyKey, err)
	}
	if len(data[NextCertKey]) > 0 || len(data[NextKeyKey]) > 0 {
		if auth.next, err = pki.ParseCA(data[NextCertKey], data[NextKeyKey]); err != nil {
			auth.successorProblem = fmt.Errorf("%s/%s: %w", NextCertKey, NextKeyKey, err)
		}
	}
	auth.trust, _ = pki.ParseBundle(data[BundleKey])
	return auth, nil
}

// data is the CA Secret's data for a.
func (a *authority) data() map[string][]byte {
	d := map[string][]byte{BundleKey: a.bundle, SignerCertKey: a.signer.CertPEM, SignerKeyKey: a.signer.KeyPEM}
	if a.next != nil {
		d[NextCertKey], d[NextKeyKey] = a.next.CertPEM, a.next.KeyPEM
	}
	return d
}

// reconcileClientSecret keeps the data planes' client certificate current: issued by
// the signer, not due for renewal, with the current trust bundle beside it.
func (m *Manager) reconcileClientSecret(ctx context.Context, auth *authority, now time.Time) error {
	secrets := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace)
	sec, err := secrets.Get(ctx, m.cfg.ClientSecret, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return m.explain(err, "read", m.cfg.ClientSecret)
	}
	exists := err == nil
	var data map[string][]byte
	if exists {
		data = sec.Data
	}
	current, _ := pki.ParseLeaf(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if m.needsLeaf(current, auth, now, nil) {
		if current, err = auth.signer.Issue("portico-xds-client", nil, pki.ClientAuth, now, m.cfg.LeafValidity); err != nil {
			return err
		}
		m.log.Info("issued the data planes' client certificate", "secret", m.cfg.Namespace+"/"+m.cfg.ClientSecret, "not_after", current.Cert.NotAfter)
	}
	m.dataPlane = current.Cert
	certPEM, keyPEM := current.CertPEM, current.KeyPEM
	want := map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, BundleKey: auth.bundle}
	if !exists {
		sec = nil
	}
	m.clientData = want
	return m.putClientSecret(ctx, m.cfg.Namespace, sec, want, auth)
}

// copyClientSecret writes the client Secret's data into ClientSecretNamespaces. It runs
// after everything else: a namespace that is missing or refused delays only the data
// planes that run there.
func (m *Manager) copyClientSecret(ctx context.Context, auth *authority) error {
	for _, ns := range m.cfg.ClientSecretNamespaces {
		cp, err := m.cfg.Client.CoreV1().Secrets(ns).Get(ctx, m.cfg.ClientSecret, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cp, err = nil, nil
		}
		if err != nil {
			return m.explain(err, "read", ns+"/"+m.cfg.ClientSecret)
		}
		if err := m.putClientSecret(ctx, ns, cp, m.clientData, auth); err != nil {
			return fmt.Errorf("copying the data planes' client certificate to namespace %s: %w", ns, err)
		}
	}
	return nil
}

// putClientSecret makes the client Secret in namespace hold want: it creates it when
// cur is nil, updates cur when its data differ, and does nothing otherwise.
func (m *Manager) putClientSecret(ctx context.Context, namespace string, cur *corev1.Secret, want map[string][]byte, auth *authority) error {
	if cur != nil && sameData(cur.Data, want) {
		return nil
	}
	if err := m.stillCurrent(ctx, auth); err != nil {
		return err
	}
	secrets := m.cfg.Client.CoreV1().Secrets(namespace)
	name := m.cfg.ClientSecret
	if namespace != m.cfg.Namespace {
		name = namespace + "/" + name
	}
	if cur == nil {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: m.cfg.ClientSecret, Namespace: namespace, Labels: labels()},
			Type:       corev1.SecretTypeTLS,
			Data:       want,
		}
		_, err := secrets.Create(ctx, sec, metav1.CreateOptions{})
		return m.explain(err, "create", name)
	}
	sec := cur.DeepCopy()
	sec.Data = want
	_, err := secrets.Update(ctx, sec, metav1.UpdateOptions{})
	return m.explain(err, "update", name)
}

// stillCurrent returns errRaced when the CA Secret has changed since auth was read:
// another replica may have rotated or replaced the authority, and writing certificates
// or a trust bundle of the old one would undo that (a deleted, perhaps leaked, CA
// trusted again).
func (m *Manager) stillCurrent(ctx context.Context, auth *authority) error {
	sec, err := m.cfg.Client.CoreV1().Secrets(m.cfg.Namespace).Get(ctx, m.cfg.CASecret, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: the CA Secret was deleted", errRaced)
	case err != nil:
		return m.explain(err, "read", m.cfg.CASecret)
	case sec.ResourceVersion != auth.version:
		return fmt.Errorf("%w: the CA Secret changed", errRaced)
	}
	return nil
}

// renewOwn issues this replica's in-memory certificates where needed.
func (m *Manager) renewOwn(auth *authority, now time.Time) error {
	var err error
	if m.server, err = m.ownLeaf(m.server, "xds-server", m.cfg.XDSServerNames, pki.ServerAuth, auth, now); err != nil {
		return err
	}
	if m.client, err = m.ownLeaf(m.client, "embedded-proxy", nil, pki.ClientAuth, auth, now); err != nil {
		return err
	}
	if len(m.cfg.WebhookServerNames) > 0 {
		if m.hook, err = m.ownLeaf(m.hook, "webhook", m.cfg.WebhookServerNames, pki.ServerAuth, auth, now); err != nil {
			return err
		}
	}
	return nil
}

func (m *Manager) ownLeaf(cur *leaf, use string, names []string, usage pki.Usage, auth *authority, now time.Time) (*leaf, error) {
	var have *pki.Leaf
	if cur != nil {
		have = cur.Leaf
	}
	if !m.needsLeaf(have, auth, now, names) {
		return cur, nil
	}
	cn := "portico-" + use
	if len(names) > 0 {
		cn = names[0]
	}
	l, err := auth.signer.Issue(cn, names, usage, now, m.cfg.LeafValidity)
	if err != nil {
		return nil, fmt.Errorf("%s certificate: %w", use, err)
	}
	pair, err := l.TLSCertificate()
	if err != nil {
		return nil, err
	}
	m.log.Info("issued a certificate", "use", use, "names", names, "not_after", l.Cert.NotAfter)
	return &leaf{Leaf: l, pair: pair}, nil
}

// needsLeaf reports whether l must be issued again: missing, not from the signer, due
// for renewal, or (for a server) not for exactly names.
func (m *Manager) needsLeaf(l *pki.Leaf, auth *authority, now time.Time, names []string) bool {
	if l == nil || !l.IssuedBy(auth.signer.Cert) || pki.DueForRenewal(l.Cert, now) || unusable(l.Cert, now) {
		return true
	}
	if names == nil {
		return false
	}
	want, ips := pki.SplitNames(names)
	for _, ip := range ips {
		want = append(want, ip.String())
	}
	return !slices.Equal(l.Names(), want)
}

// reconcileWebhookConfiguration sets the caBundle of every webhook of the configured
// ValidatingWebhookConfiguration to bundle. Failures are reported, not returned: the
// webhook is optional (failurePolicy Ignore) and must never hold xDS back.
func (m *Manager) reconcileWebhookConfiguration(ctx context.Context, auth *authority) {
	bundle := auth.bundle
	name := m.cfg.WebhookConfiguration
	if name == "" {
		return
	}
	vwcs := m.cfg.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	note := func(msg string, args ...any) {
		if key := fmt.Sprint(msg, args); key != m.webhookNote {
			m.webhookNote = key
			m.log.Warn(msg, args...)
		}
	}
	vwc, err := vwcs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		note("the ValidatingWebhookConfiguration does not exist; the admission webhook is not registered (kubectl apply -k deploy/ creates it)", "name", name)
		return
	}
	if err != nil {
		note("cannot read the ValidatingWebhookConfiguration to set its caBundle; the API server cannot verify the webhook (and admits everything) until it can", "name", name, "err", err)
		return
	}
	changed := false
	vwc = vwc.DeepCopy()
	for i := range vwc.Webhooks {
		if !bytes.Equal(vwc.Webhooks[i].ClientConfig.CABundle, bundle) {
			vwc.Webhooks[i].ClientConfig.CABundle = bundle
			changed = true
		}
	}
	if !changed {
		m.webhookNote = ""
		return
	}
	if err := m.stillCurrent(ctx, auth); err != nil {
		m.log.Debug("not setting the webhook configuration's caBundle: the certificate authority changed meanwhile", "err", err)
		return
	}
	if _, err := vwcs.Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		note("cannot set the caBundle of the ValidatingWebhookConfiguration; the API server cannot verify the webhook (and admits everything) until it can", "name", name, "err", err)
		return
	}
	m.webhookNote = ""
	m.log.Info("set the webhook configuration's caBundle", "name", name)
}

func (m *Manager) recordExpiry(auth *authority) {
	if m.expiry == nil {
		return
	}
	set := func(use string, c *x509.Certificate) { m.expiry.WithLabelValues(use).Set(float64(c.NotAfter.Unix())) }
	set("ca", auth.signer.Cert)
	set("xds-server", m.server.Cert)
	set("embedded-proxy", m.client.Cert)
	set("xds-client", m.dataPlane)
	if m.hook != nil {
		set("webhook", m.hook.Cert)
	}
}

// explain wraps an API error with what the controller needs to be allowed.
func (m *Manager) explain(err error, verb, secret string) error {
	if err == nil {
		return nil
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s Secret %s/%s: %w (the controller's ServiceAccount needs get, create and update on Secrets in namespace %s: the Role portico-certificates in deploy/rbac.yaml)", verb, m.cfg.Namespace, secret, err, m.cfg.Namespace)
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: %s Secret %s/%s: %w", errRaced, verb, m.cfg.Namespace, secret, err)
	}
	return fmt.Errorf("%s Secret %s/%s: %w", verb, m.cfg.Namespace, secret, err)
}

// ServerCredentials returns the xDS server's gRPC credentials: this replica's server
// certificate, and client certificates required and verified against the trust bundle.
// Until the first Reconcile succeeds, handshakes fail.
func (m *Manager) ServerCredentials() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			mat := m.cur.Load()
			if mat == nil {
				return nil, errors.New("the xDS server's certificate has not been issued yet")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*mat.server},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    mat.pool,
				NextProtos:   []string{"h2"},
				Time:         m.cfg.Now,
			}, nil
		},
	})
}

// ClientCredentials returns the embedded proxy's gRPC credentials: its own client
// certificate, and the server verified as serverName against the trust bundle.
func (m *Manager) ClientCredentials(serverName string) credentials.TransportCredentials {
	return xdstls.DynamicClientCredentials(serverName, func() (*tls.Config, error) {
		mat := m.cur.Load()
		if mat == nil {
			return nil, errors.New("the embedded proxy's certificate has not been issued yet")
		}
		return &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{*mat.client},
			RootCAs:      mat.pool,
			Time:         m.cfg.Now,
		}, nil
	})
}

// WebhookCertificate is tls.Config.GetCertificate for the admission webhook.
func (m *Manager) WebhookCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	mat := m.cur.Load()
	if mat == nil || mat.hook == nil {
		return nil, errors.New("the webhook's certificate has not been issued yet")
	}
	return mat.hook, nil
}

// TrustBundle returns the PEM bundle of trusted CAs (nil before the first Reconcile).
func (m *Manager) TrustBundle() []byte {
	if mat := m.cur.Load(); mat != nil {
		return mat.bundle
	}
	return nil
}

// skewTolerance is how far apart the clocks of two replicas, or of a replica before and
// after a correction, may be before a certificate one of them made counts as made in
// the future: within it, a certificate valid from a little later is left alone rather
// than issued again (replicas a few minutes apart would otherwise reissue each other's
// certificates at every check).
const skewTolerance = time.Hour

// unusable reports whether c has expired, or becomes valid only well after now.
func unusable(c *x509.Certificate, now time.Time) bool {
	return now.After(c.NotAfter) || now.Add(skewTolerance).Before(c.NotBefore)
}

func caName(now time.Time) string { return "portico-ca-" + now.UTC().Format("20060102T150405Z") }

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "portico", "app.kubernetes.io/managed-by": "portico"}
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if !bytes.Equal(a[k], v) {
			return false
		}
	}
	return true
}
