package dag

import (
	"encoding/pem"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// ClientValidation is how a TLS host asks clients for a certificate and checks it
// (HTTPProxy spec.virtualhost.tls.clientValidation, a Gateway's frontend validation).
type ClientValidation struct {
	// CAName is the namespace/name of the object holding CACert; CACert are the PEM
	// CAs a client certificate must chain to (nil with SkipVerify and no CA).
	CAName string
	CACert []byte
	// CRL are PEM revocation lists covering the CAs (nil: none); OnlyLeafCRL checks
	// the client's own certificate only.
	CRL         []byte
	OnlyLeafCRL bool
	// Optional lets clients without a certificate in; one that is sent is checked.
	Optional bool
	// SkipVerify asks for a certificate without verifying it.
	SkipVerify bool
	// Forward, when set, passes parts of the certificate upstream in
	// x-forwarded-client-cert.
	Forward *ForwardClientCert
}

// ForwardClientCert are the parts of a client certificate sent upstream.
type ForwardClientCert struct {
	Subject, Cert, Chain, DNS, URI bool
}

// crlKey is the key of a Secret holding revocation lists, as upstream HTTPProxy names it.
const crlKey = "crl.pem"

// validateClientValidation checks what can be checked of clientValidation without
// the Secrets it names.
func validateClientValidation(cv *contourv1.DownstreamValidation, t *contourv1.TLS, c *proxyCheck) {
	const field = "spec.virtualhost.tls.clientValidation"
	if t.Passthrough {
		c.fail(problemTLS, "ClientValidationInvalid", "%s needs Portico to terminate TLS: with passthrough the backend sees the client's certificate itself", field)
	}
	if cv.CACertificate == "" && !cv.SkipClientCertValidation {
		c.fail(problemTLS, "ClientValidationInvalid", "%s.caSecret is required: name a Secret whose ca.crt holds the CAs client certificates must chain to (or set skipClientCertValidation: true to take any certificate)", field)
	}
	if cv.CertificateRevocationList != "" && cv.SkipClientCertValidation {
		c.fail(problemTLS, "ClientValidationInvalid", "%s.crlSecret cannot be used with skipClientCertValidation: revocation is checked on verified certificates only", field)
	}
	if cv.OnlyVerifyLeafCertCrl && cv.CertificateRevocationList == "" {
		c.fail(problemTLS, "ClientValidationInvalid", "%s.crlOnlyVerifyLeafCert needs crlSecret", field)
	}
	for _, ref := range []struct{ name, value string }{{"caSecret", cv.CACertificate}, {"crlSecret", cv.CertificateRevocationList}} {
		if ref.value == "" {
			continue
		}
		if msg := validateSecretRef(ref.value); msg != "" {
			c.fail(problemTLS, "ClientValidationInvalid", "%s.%s: %s", field, ref.name, msg)
		}
	}
}

// proxyClientValidation resolves a root's clientValidation; ok is false when the
// root cannot be served (its clients must never get in unchecked).
func (b *builder) proxyClientValidation(root *proxyNode) (*ClientValidation, bool) {
	t := root.p.Spec.VirtualHost.TLS
	if t == nil || t.ClientValidation == nil || t.Passthrough {
		return nil, true
	}
	cv := t.ClientValidation
	const field = "spec.virtualhost.tls.clientValidation"
	out := &ClientValidation{
		OnlyLeafCRL: cv.OnlyVerifyLeafCertCrl,
		Optional:    cv.OptionalClientCertificate,
		SkipVerify:  cv.SkipClientCertValidation,
	}
	if f := cv.ForwardClientCertificate; f != nil {
		out.Forward = &ForwardClientCert{Subject: f.Subject, Cert: f.Cert, Chain: f.Chain, DNS: f.DNS, URI: f.URI}
	}
	if cv.CACertificate != "" {
		key, ok := b.delegatedSecret(root, cv.CACertificate, field+".caSecret")
		if !ok {
			return nil, false
		}
		ca, msg := b.caSecret(key)
		if msg != "" {
			root.check.fail(problemTLS, "CASecretInvalid", "%s.caSecret: %s", field, msg)
			return nil, false
		}
		out.CAName, out.CACert = key.String(), ca
	}
	if cv.CertificateRevocationList != "" {
		key, ok := b.delegatedSecret(root, cv.CertificateRevocationList, field+".crlSecret")
		if !ok {
			return nil, false
		}
		crl, msg := b.crlSecret(key)
		if msg != "" {
			root.check.fail(problemTLS, "CRLSecretInvalid", "%s.crlSecret: %s", field, msg)
			return nil, false
		}
		out.CRL = crl
	}
	return out, true
}

// delegatedSecret resolves a Secret reference of a root: its own namespace's, or
// "namespace/name" that namespace delegates to the root's with a
// TLSCertificateDelegation.
func (b *builder) delegatedSecret(root *proxyNode, ref, field string) (types.NamespacedName, bool) {
	key := types.NamespacedName{Namespace: root.p.Namespace, Name: ref}
	if ns, name, ok := strings.Cut(ref, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
		if ns != root.p.Namespace && !b.certificateDelegated(key, root.p.Namespace) {
			root.check.fail(problemTLS, "DelegationNotPermitted", "%s %q: namespace %s does not delegate Secret %s to namespace %s; add a TLSCertificateDelegation in %s listing it",
				field, ref, ns, name, root.p.Namespace, ns)
			return key, false
		}
	}
	return key, true
}

// crlSecret returns the PEM revocation lists of a Secret ("crl.pem").
func (b *builder) crlSecret(key types.NamespacedName) ([]byte, string) {
	s := b.store.Secrets[key]
	if s == nil {
		return nil, fmt.Sprintf("Secret %s not found", key)
	}
	crl := s.Data[crlKey]
	if len(crl) == 0 {
		return nil, fmt.Sprintf("Secret %s has no %q", key, crlKey)
	}
	if !hasPEMBlock(crl, "X509 CRL") {
		return nil, fmt.Sprintf("Secret %s: %q holds no PEM X509 CRL", key, crlKey)
	}
	return crl, ""
}

func hasPEMBlock(b []byte, typ string) bool {
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return false
		}
		if blk.Type == typ {
			return true
		}
	}
}
