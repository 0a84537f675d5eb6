package hcm

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"strings"
)

// xfccDetails are the parts of the client certificate the connection
// manager puts in x-forwarded-client-cert (forward_client_cert_details
// SANITIZE_SET, set_current_client_cert_details); nil: the header is
// removed (SANITIZE).
type xfccDetails struct {
	Subject, Cert, Chain, Dns, Uri bool
}

// header is the x-forwarded-client-cert value for a connection, in Envoy's
// format and order (By, Hash, Cert, Chain, Subject, URI, DNS); "" when the
// client sent no certificate.
func (d *xfccDetails) header(cs *tls.ConnectionState, local *tls.Certificate) string {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return ""
	}
	leaf := cs.PeerCertificates[0]
	var parts []string
	if local != nil && local.Leaf != nil {
		for _, u := range local.Leaf.URIs {
			parts = append(parts, "By="+u.String())
		}
	}
	sum := sha256.Sum256(leaf.Raw)
	parts = append(parts, "Hash="+hex.EncodeToString(sum[:]))
	if d.Cert {
		parts = append(parts, `Cert="`+urlEncodedPEM(leaf)+`"`)
	}
	if d.Chain {
		var b strings.Builder
		for _, c := range cs.PeerCertificates {
			b.WriteString(urlEncodedPEM(c))
		}
		parts = append(parts, `Chain="`+b.String()+`"`)
	}
	if d.Subject {
		parts = append(parts, `Subject="`+leaf.Subject.String()+`"`)
	}
	if d.Uri && len(leaf.URIs) > 0 {
		// Envoy gives the first URI SAN only.
		parts = append(parts, "URI="+leaf.URIs[0].String())
	}
	if d.Dns {
		for _, n := range leaf.DNSNames {
			parts = append(parts, "DNS="+n)
		}
	}
	return strings.Join(parts, ";")
}

// pemEscaper is Envoy's URL encoding of a PEM certificate in the header.
var pemEscaper = strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D")

func urlEncodedPEM(c *x509.Certificate) string {
	return pemEscaper.Replace(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})))
}
