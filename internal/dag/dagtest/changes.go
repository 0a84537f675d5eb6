// Package dagtest makes random but reproducible sequences of store changes, for the
// property tests that hold incremental builds and translations to full ones.
package dagtest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"

	"github.com/portico-dev/portico/internal/store"
	"github.com/portico-dev/portico/internal/testutil"
)

// Changes makes random changes to a store. Its objects are drawn from small pools of
// names, hosts (precise, wildcard, nested wildcard, catch-all, upper case), paths,
// Services and Secrets, so that they collide, delegate, include, conflict and tie on age
// all the time.
type Changes struct {
	rng *rand.Rand
	// jwt draws the JWT policies of HTTPProxies apart from rng, which so makes
	// the same objects otherwise as before they had them.
	jwt     *rand.Rand
	cert    testutil.Cert
	hosts   []string
	paths   []string
	names   []string
	nss     []string
	svcs    []string
	secrets []string
	times   []string
	// gatewayAPI adds Gateway API objects to the changes (RunGatewayAPI); routesMostly
	// makes them mostly routes after a warm-up (RunGatewayAPIRoutes).
	gatewayAPI   bool
	routesMostly bool
	applied      int
}

// NewChanges returns a generator whose sequence depends on seed only.
func NewChanges(seed uint64) *Changes {
	return &Changes{
		rng:     rand.New(rand.NewPCG(seed, 7)),
		jwt:     rand.New(rand.NewPCG(seed, 11)),
		cert:    testutil.SelfSigned("a.foo.com", "*.foo.com", "c.bar.com"),
		hosts:   []string{"a.foo.com", "b.foo.com", "*.foo.com", "x.a.foo.com", "*.a.foo.com", "c.bar.com", "A.foo.com", ""},
		paths:   []string{"/", "/api", "/api/v1", "/x"},
		names:   []string{"n1", "n2", "n3"},
		nss:     []string{"default", "team"},
		svcs:    []string{"web", "api"},
		secrets: []string{"cert", "bad", "default/cert"},
		times:   []string{"2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"},
	}
}

// IntN returns a random number in [0, n) from the generator's sequence.
func (c *Changes) IntN(n int) int { return c.rng.IntN(n) }

func pick[T any](c *Changes, xs []T) T { return xs[c.rng.IntN(len(xs))] }

// Apply makes one change to s: an object added or replaced by a new version (60%),
// deleted (20%), or replaced by an equal copy (10%; a new pointer, nothing changed). It
// returns a description for failure messages.
func (c *Changes) Apply(s *store.Store) (string, error) {
	existing := Objects(s)
	c.applied++
	if c.routesMostly && c.applied > routesWarmup {
		if routes := gatewayRoutes(s); len(routes) > 0 && c.rng.IntN(5) > 0 {
			existing = routes // what is deleted or copied: a route, mostly
		}
	}
	switch r := c.rng.IntN(10); {
	case r < 2 && len(existing) > 0:
		o := pick(c, existing)
		s.Delete(o)
		return "delete " + describe(o), nil
	case r < 3 && len(existing) > 0:
		o := pick(c, existing).DeepCopyObject()
		s.Upsert(o)
		return "copy " + describe(o), nil
	default:
		o, err := c.object()
		if err != nil {
			return "", err
		}
		s.Upsert(o)
		return "upsert " + describe(o), nil
	}
}

func describe(o runtime.Object) string {
	m := o.(metav1.Object)
	return fmt.Sprintf("%T %s/%s", o, m.GetNamespace(), m.GetName())
}

// Objects returns every object in s, in an order that depends on the objects only.
func Objects(s *store.Store) []runtime.Object {
	var out []runtime.Object
	out = appendValues(out, s.Ingresses)
	out = appendValues(out, s.IngressRoutes)
	out = appendValues(out, s.HTTPProxies)
	out = appendValues(out, s.Services)
	out = appendValues(out, s.Endpoints)
	out = appendValues(out, s.Secrets)
	out = appendValues(out, s.TLSCertificateDelegations)
	out = appendValues(out, s.ProjectTLSCertificateDelegations)
	for svc := range s.EndpointSlices {
		for _, es := range s.ServiceSlices(svc) {
			out = append(out, es)
		}
	}
	for _, ic := range s.IngressClasses {
		out = append(out, ic)
	}
	out = gatewayObjects(s, out)
	slices.SortStableFunc(out, func(a, b runtime.Object) int { return strings.Compare(describe(a), describe(b)) })
	return out
}

func appendValues[V runtime.Object](out []runtime.Object, m map[types.NamespacedName]V) []runtime.Object {
	for _, k := range slices.SortedFunc(maps.Keys(m), func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }) {
		out = append(out, m[k])
	}
	return out
}

func decode[T any, PT interface {
	*T
	runtime.Object
}](doc string) (PT, error) {
	var obj T
	if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil {
		return nil, fmt.Errorf("decoding generated object: %w\n%s", err, doc)
	}
	return PT(&obj), nil
}

func (c *Changes) object() (runtime.Object, error) {
	switch {
	case c.routesMostly && c.applied > routesWarmup:
		return c.routeChange()
	case c.routesMostly:
		return c.gatewayObject()
	}
	if c.gatewayAPI && c.rng.IntN(2) == 0 {
		return c.gatewayObject()
	}
	meta := fmt.Sprintf("{name: %s, namespace: %s, creationTimestamp: %q}", pick(c, c.names), pick(c, c.nss), pick(c, c.times))
	switch c.rng.IntN(12) {
	case 0, 1, 2:
		return c.ingress(meta)
	case 3, 4:
		return c.ingressRoute(meta)
	case 5, 6:
		return c.httpProxy(meta)
	case 7:
		return c.service()
	case 8:
		return c.endpoints(), nil
	case 9:
		return c.secret(), nil
	case 10:
		return c.delegation()
	default:
		controller := pick(c, []string{"portico.dev/ingress-controller", "example.com/other"})
		return &networkingv1.IngressClass{ObjectMeta: metav1.ObjectMeta{Name: pick(c, []string{"portico", "other"})},
			Spec: networkingv1.IngressClassSpec{Controller: controller}}, nil
	}
}

func (c *Changes) service() (runtime.Object, error) {
	ports := "[{name: http, port: 80}]"
	if c.rng.IntN(4) == 0 {
		ports = "[{name: other, port: 81}]"
	}
	typ := ""
	if c.rng.IntN(6) == 0 {
		typ = ", type: ExternalName, externalName: example.org"
	}
	return decode[corev1.Service](fmt.Sprintf("metadata: {name: %s, namespace: %s}\nspec: {ports: %s%s}", pick(c, c.svcs), pick(c, c.nss), ports, typ))
}

func (c *Changes) endpoints() runtime.Object {
	ns, svc := pick(c, c.nss), pick(c, c.svcs)
	port, portName := int32(8080), "http"
	if c.rng.IntN(2) == 0 {
		return &corev1.Endpoints{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc},
			Subsets: []corev1.EndpointSubset{{
				Ports:     []corev1.EndpointPort{{Name: portName, Port: port}},
				Addresses: []corev1.EndpointAddress{{IP: fmt.Sprintf("10.0.0.%d", c.rng.IntN(3)+1)}, {IP: "not-an-ip"}},
			}},
		}
	}
	ready := c.rng.IntN(3) > 0
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pick(c, c.names), Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		Ports:      []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.1.0.%d", c.rng.IntN(3)+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
}

func (c *Changes) secret() runtime.Object {
	name := strings.TrimPrefix(pick(c, c.secrets), "default/")
	cert := c.cert.CertPEM
	if c.rng.IntN(3) == 0 {
		cert = []byte("not a certificate")
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: pick(c, c.nss), Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: c.cert.KeyPEM, "ca.crt": c.cert.CertPEM},
	}
}

func (c *Changes) delegation() (runtime.Object, error) {
	doc := fmt.Sprintf("metadata: {name: d, namespace: default}\nspec: {delegations: [{secretName: cert, targetNamespaces: %s}]}",
		pick(c, []string{`["*"]`, `[team]`, `[other]`}))
	if c.rng.IntN(2) == 0 {
		return decode[ingressroutev1.TLSCertificateDelegation](doc)
	}
	return decode[contourv1.TLSCertificateDelegation](doc)
}

func (c *Changes) ingress(meta string) (runtime.Object, error) {
	var b strings.Builder
	if c.rng.IntN(6) == 0 {
		meta = strings.TrimSuffix(meta, "}") + ", annotations: {kubernetes.io/ingress.class: other}}"
	}
	fmt.Fprintf(&b, "metadata: %s\nspec:\n", meta)
	backend := func() string {
		return fmt.Sprintf("{service: {name: %s, port: {number: 80}}}", pick(c, c.svcs))
	}
	if c.rng.IntN(4) == 0 {
		fmt.Fprintf(&b, "  defaultBackend: %s\n", backend())
	}
	if c.rng.IntN(3) == 0 {
		fmt.Fprintf(&b, "  tls: [{hosts: [%q], secretName: %s}]\n", pick(c, c.hosts), strings.TrimPrefix(pick(c, c.secrets), "default/"))
	}
	b.WriteString("  rules:\n")
	for range c.rng.IntN(3) {
		fmt.Fprintf(&b, "  - host: %q\n    http: {paths: [{path: %s, pathType: %s, backend: %s}]}\n",
			pick(c, c.hosts), pick(c, c.paths), pick(c, []string{"Prefix", "Exact"}), backend())
	}
	return decode[networkingv1.Ingress](b.String())
}

func (c *Changes) ingressRoute(meta string) (runtime.Object, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "metadata: %s\nspec:\n", meta)
	if c.rng.IntN(5) < 3 {
		fmt.Fprintf(&b, "  virtualhost: {fqdn: %q", pick(c, c.hosts))
		if c.rng.IntN(3) == 0 {
			fmt.Fprintf(&b, ", aliases: [%q]", pick(c, c.hosts))
		}
		if c.rng.IntN(3) == 0 {
			fmt.Fprintf(&b, ", tls: {secretName: %s}", pick(c, c.secrets))
		}
		b.WriteString("}\n")
	}
	b.WriteString("  routes:\n")
	for range c.rng.IntN(3) + 1 {
		if c.rng.IntN(3) == 0 {
			fmt.Fprintf(&b, "  - {match: %s, delegate: {name: %s, namespace: %s}}\n", pick(c, c.paths), pick(c, c.names), pick(c, c.nss))
			continue
		}
		fmt.Fprintf(&b, "  - {match: %s, services: [{name: %s, port: 80}]}\n", pick(c, c.paths), pick(c, c.svcs))
	}
	return decode[ingressroutev1.IngressRoute](b.String())
}

func (c *Changes) httpProxy(meta string) (runtime.Object, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "metadata: %s\nspec:\n", meta)
	tcp := c.rng.IntN(6) == 0
	if c.rng.IntN(5) < 3 {
		fmt.Fprintf(&b, "  virtualhost: {fqdn: %q", pick(c, c.hosts))
		switch {
		case tcp && c.rng.IntN(2) == 0:
			b.WriteString(", tls: {passthrough: true}")
		case tcp || c.rng.IntN(3) == 0:
			fmt.Fprintf(&b, ", tls: {secretName: %s}", pick(c, c.secrets))
			b.WriteString(c.jwtProviders())
		}
		b.WriteString("}\n")
	}
	if tcp {
		if c.rng.IntN(2) == 0 {
			fmt.Fprintf(&b, "  tcpproxy: {include: {name: %s, namespace: %s}}\n", pick(c, c.names), pick(c, c.nss))
		} else {
			fmt.Fprintf(&b, "  tcpproxy: {services: [{name: %s, port: 80}]}\n", pick(c, c.svcs))
		}
	}
	if n := c.rng.IntN(3); n > 0 {
		b.WriteString("  includes:\n")
		for range n {
			fmt.Fprintf(&b, "  - {name: %s, namespace: %s, conditions: [{prefix: %s}]}\n", pick(c, c.names), pick(c, c.nss), pick(c, c.paths))
		}
	}
	b.WriteString("  routes:\n")
	routes := c.rng.IntN(3)
	for range routes {
		validation := ""
		if c.rng.IntN(4) == 0 {
			validation = fmt.Sprintf(", protocol: tls, validation: {caSecret: %s, subjectName: a.foo.com}", pick(c, c.secrets))
		}
		fmt.Fprintf(&b, "  - {conditions: [{prefix: %s}], services: [{name: %s, port: 80%s}]%s}\n", pick(c, c.paths), pick(c, c.svcs), validation, c.jwtPolicy())
	}
	if routes == 0 {
		b.WriteString("  - {services: [{name: web, port: 80}]}\n")
	}
	return decode[contourv1.HTTPProxy](b.String())
}

// jwtProviders are a root's JWT providers, often none; their key sets are
// shared by name across roots, with and without a CA.
func (c *Changes) jwtProviders() string {
	switch c.jwt.IntN(4) {
	case 0:
		return `, jwtProviders: [{name: p, default: true, remoteJWKS: {uri: "https://idp.foo.com/keys"}}]`
	case 1:
		return `, jwtProviders: [{name: p, remoteJWKS: {uri: "https://idp.foo.com/keys", validation: {caSecret: cert, subjectName: idp.foo.com}}}, {name: q, default: true, remoteJWKS: {uri: "http://keys.bar.com:8080/k", cacheDuration: 1m}}]`
	}
	return ""
}

// jwtPolicy is a route's jwtVerificationPolicy, often none; the provider it
// names may be missing from the root.
func (c *Changes) jwtPolicy() string {
	switch c.jwt.IntN(6) {
	case 0:
		return ", jwtVerificationPolicy: {disabled: true}"
	case 1:
		return ", jwtVerificationPolicy: {require: p}"
	case 2:
		return ", jwtVerificationPolicy: {require: q}"
	}
	return ""
}

// Fresh returns a new store holding the objects of s, made as `portico run` once made
// one per reload: no history shared with s.
func Fresh(s *store.Store) *store.Store { return store.FromObjects(Objects(s)) }

// Check is called after each change of Run with the store, the seed, the step and the
// changes so far (for failure messages).
type Check func(s *store.Store, seed uint64, step int, log string)

// Run applies steps random changes for each seed in 1..seeds, starting from an empty
// store, and calls start at each seed's beginning and check after every change. Now and
// then the store is replaced by a clone (serve's snapshots) or by a fresh store holding
// the same objects (no history in common), which a builder that remembers must handle.
func Run(tb testing.TB, seeds, steps int, start func(seed uint64), check Check) {
	tb.Helper()
	runWith(tb, seeds, steps, false, start, check)
}

func runWith(tb testing.TB, seeds, steps int, gatewayAPI bool, start func(seed uint64), check Check) {
	tb.Helper()
	runMode(tb, seeds, steps, func(c *Changes) { c.gatewayAPI = gatewayAPI }, start, check)
}

// runMode is Run with the generator set up by mode.
func runMode(tb testing.TB, seeds, steps int, mode func(*Changes), start func(seed uint64), check Check) {
	tb.Helper()
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		changes := NewChanges(seed)
		mode(changes)
		start(seed)
		s := store.New()
		var log []string
		for step := range steps {
			change, err := changes.Apply(s)
			if err != nil {
				tb.Fatal(err)
			}
			log = append(log, change)
			switch changes.IntN(10) {
			case 0:
				s = s.Clone()
			case 1:
				s = Fresh(s)
			}
			check(s, seed, step, strings.Join(log, "\n"))
		}
	}
}
