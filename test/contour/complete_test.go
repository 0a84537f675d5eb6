package contour

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
	contourv1alpha1 "github.com/portico-dev/portico/apis/projectcontour/v1alpha1"
	"github.com/portico-dev/portico/internal/testutil"
)

type key struct{ kind, namespace, name string }

func keyOf(obj runtime.Object) key {
	m := obj.(metav1.Object)
	return key{obj.GetObjectKind().GroupVersionKind().Kind, m.GetNamespace(), m.GetName()}
}

// scenario is what a reader of u applies: u's objects, the HTTPProxies they include
// that the same page (or example directory) defines elsewhere, and the Services,
// Secrets and ExtensionServices they name that the documentation takes for granted
// (a page about rate limits does not show the Deployment and Service of its backend).
//
// Names in omit are left missing: the documentation shows what Contour does without them.
func scenario(u unit, group []unit, omit []string) []runtime.Object {
	objs := slices.Clone(u.objs)
	have := map[key]bool{}
	for _, o := range objs {
		have[keyOf(o)] = true
	}
	add := func(o runtime.Object) {
		if k := keyOf(o); !have[k] {
			have[k] = true
			objs = append(objs, o)
		}
	}
	for i := 0; i < len(objs); i++ {
		p, ok := objs[i].(*contourv1.HTTPProxy)
		if !ok {
			continue
		}
		for _, inc := range p.Spec.Includes {
			ns := inc.Namespace
			if ns == "" {
				ns = p.Namespace
			}
			if o := findInGroup(group, key{"HTTPProxy", ns, inc.Name}); o != nil {
				add(o)
			}
		}
	}
	for _, o := range slices.Clone(objs) {
		p, ok := o.(*contourv1.HTTPProxy)
		if !ok {
			continue
		}
		for _, ref := range references(p) {
			if slices.Contains(omit, ref.(metav1.Object).GetName()) {
				continue
			}
			if o := findInGroup(group, keyOf(ref)); o != nil {
				ref = o // the page's own
			}
			add(ref)
		}
		for _, d := range delegations(p, group) {
			add(d)
		}
	}
	fallback := testutil.TLSSecret(fallbackSecret.Namespace, fallbackSecret.Name, testutil.SelfSigned("fallback.example.com"))
	fallback.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	add(fallback)
	return objs
}

// delegations are the TLSCertificateDelegations of the page that p's Secrets in other
// namespaces need.
func delegations(p *contourv1.HTTPProxy, group []unit) []runtime.Object {
	var out []runtime.Object
	for _, ref := range secretRefs(p) {
		ns, _ := split(p.Namespace, ref)
		if ns == p.Namespace {
			continue
		}
		for _, u := range group {
			for _, o := range u.objs {
				if k := keyOf(o); k.kind == "TLSCertificateDelegation" && k.namespace == ns {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// secretRefs are the Secrets p names.
func secretRefs(p *contourv1.HTTPProxy) []string {
	var refs []string
	if vh := p.Spec.VirtualHost; vh != nil && vh.TLS != nil {
		refs = append(refs, vh.TLS.SecretName)
		if cv := vh.TLS.ClientValidation; cv != nil {
			refs = append(refs, cv.CACertificate, cv.CertificateRevocationList)
		}
	}
	for _, r := range p.Spec.Routes {
		for _, s := range r.Services {
			if s.UpstreamValidation != nil {
				refs = append(refs, s.UpstreamValidation.CACertificate)
			}
		}
	}
	return slices.DeleteFunc(refs, func(r string) bool { return r == "" })
}

// findInGroup returns the first object with key k in the units of a group.
func findInGroup(group []unit, k key) runtime.Object {
	for _, u := range group {
		for _, o := range u.objs {
			if keyOf(o) == k {
				return o
			}
		}
	}
	return nil
}

// references are stand-ins for the objects p names: a Service per service (ClusterIP,
// with the port p uses), a TLS Secret per certificate, a CA Secret per CA, an
// ExtensionService per authorization server.
func references(p *contourv1.HTTPProxy) []runtime.Object {
	var out []runtime.Object
	h2c := "h2c"
	svc := func(name string, ports ...int) *corev1.Service {
		s := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: name},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10"},
		}
		for i, port := range ports {
			if port > 0 {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(port), TargetPort: intstr.FromInt(port), Protocol: corev1.ProtocolTCP})
			}
		}
		out = append(out, s)
		return s
	}
	ca := func(ref string) {
		if ref != "" {
			ns, name := split(p.Namespace, ref)
			c := testutil.SelfSigned("ca.example.com")
			out = append(out, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"ca.crt": c.CertPEM}})
		}
	}
	services := func(ss []contourv1.Service) {
		for _, s := range ss {
			service := svc(s.Name, s.Port, s.HealthPort)
			if s.UpstreamValidation != nil {
				ca(s.UpstreamValidation.CACertificate)
				if s.Protocol == nil {
					// "validation ... must point to a Service with a matching
					// projectcontour.io/upstream-protocol.tls Service annotation"
					service.SetAnnotations(map[string]string{"projectcontour.io/upstream-protocol.tls": fmt.Sprint(s.Port)})
				}
			}
		}
	}
	for _, r := range p.Spec.Routes {
		services(r.Services)
	}
	if tp := p.Spec.TCPProxy; tp != nil {
		services(tp.Services)
	}
	vh := p.Spec.VirtualHost
	if vh == nil {
		return out
	}
	if tls := vh.TLS; tls != nil {
		if tls.SecretName != "" {
			ns, name := split(p.Namespace, tls.SecretName)
			s := testutil.TLSSecret(ns, name, testutil.SelfSigned(vh.Fqdn))
			s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
			out = append(out, s)
		}
		if cv := tls.ClientValidation; cv != nil {
			ca(cv.CACertificate)
			if cv.CertificateRevocationList != "" {
				ns, name := split(p.Namespace, cv.CertificateRevocationList)
				out = append(out, &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"crl.pem": emptyCRL()}})
			}
		}
	}
	if a := vh.Authorization; a != nil && a.ExtensionServiceRef.Name != "" {
		ns := a.ExtensionServiceRef.Namespace
		if ns == "" {
			ns = p.Namespace
		}
		out = append(out, &contourv1alpha1.ExtensionService{
			TypeMeta:   metav1.TypeMeta{APIVersion: "projectcontour.io/v1alpha1", Kind: "ExtensionService"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.ExtensionServiceRef.Name},
			Spec:       contourv1alpha1.ExtensionServiceSpec{Services: []contourv1alpha1.ExtensionServiceTarget{{Name: a.ExtensionServiceRef.Name, Port: 9443}}, Protocol: &h2c},
		})
		out = append(out, &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a.ExtensionServiceRef.Name},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.11", Ports: []corev1.ServicePort{{Port: 9443, Protocol: corev1.ProtocolTCP}}},
		})
	}
	return out
}

// split reads "namespace/name", or a name in ns.
func split(ns, ref string) (string, string) {
	if a, b, ok := strings.Cut(ref, "/"); ok {
		return a, b
	}
	return ns, ref
}

// emptyCRL is a PEM revocation list, signed by a CA of its own, that revokes nothing.
func emptyCRL() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "crl issuer"}, SubjectKeyId: []byte{1},
		KeyUsage: x509.KeyUsageCRLSign | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1),
		ThisUpdate: time.Now().Add(-time.Hour), NextUpdate: time.Now().Add(24 * time.Hour)}, ca, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der})
}
