package dag

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// JWT verification (HTTPProxy spec.virtualhost.jwtProviders and route
// jwtVerificationPolicy): a TLS virtual host names the providers whose tokens it
// accepts; each route requires one of them, or none.

// Defaults of a remote key set, as upstream HTTPProxy and Envoy have them.
const (
	DefaultJWKSTimeout       = time.Second
	DefaultJWKSCacheDuration = 10 * time.Minute
)

// JWTProvider verifies JSON Web Tokens: their signature with the keys of its key
// set, and their issuer and audiences when it names them.
type JWTProvider struct {
	Name string
	// Issuer, when set, must be the token's "iss".
	Issuer string
	// Audiences, when set, must include one of the token's "aud".
	Audiences []string
	// ForwardJWT keeps the token in the request sent upstream.
	ForwardJWT bool
	// Default is required by the routes that name no provider.
	Default bool
	// RemoteJWKS is where its keys are fetched from; without it, LocalJWKS holds
	// them.
	RemoteJWKS *RemoteJWKS
	// LocalJWKS is the key set's JSON, read from a Secret.
	LocalJWKS string
}

// RemoteJWKS is a key set the data plane fetches over HTTP(S) from Cluster.
type RemoteJWKS struct {
	URI           string
	Timeout       time.Duration
	CacheDuration time.Duration
	// Cluster reaches the URI's host; it is published with the host's clusters.
	Cluster *Cluster
}

// JWTRequirement is what a route requires of JSON Web Tokens. The zero value
// requires nothing and configures nothing.
type JWTRequirement struct {
	// Provider names the virtual host's provider whose token is required.
	Provider string
	// Disabled says explicitly that the route's requests need no token, on a
	// host that has providers.
	Disabled bool
}

// IsZero reports whether the route says nothing about tokens.
func (r JWTRequirement) IsZero() bool { return r.Provider == "" && !r.Disabled }

// JWKSClusters are the clusters of the host's remote key sets.
func (svh *SecureVirtualHost) JWKSClusters() []*Cluster {
	if len(svh.JWTProviders) == 0 {
		return nil
	}
	var out []*Cluster
	for i := range svh.JWTProviders {
		if r := svh.JWTProviders[i].RemoteJWKS; r != nil {
			out = append(out, r.Cluster)
		}
	}
	return out
}

// problemJWT is the status sub-condition type of JWT verification problems.
const problemJWT = "JWTVerificationError"

var jwksDNSLookupFamilies = []string{"auto", "v4", "v6", "all"}

// validateJWTProviders checks spec.virtualhost.jwtProviders on their own (no
// Secret is looked at): what the webhook and `portico check` refuse.
func validateJWTProviders(vh *contourv1.VirtualHost, c *proxyCheck) {
	if len(vh.JWTProviders) == 0 {
		return
	}
	if vh.TLS == nil || vh.TLS.SecretName == "" {
		c.fail(problemJWT, "JWTVerificationNotPermitted", "spec.virtualhost.jwtProviders needs spec.virtualhost.tls.secretName: tokens are verified only on a host that terminates TLS (a token sent in clear text can be replayed); add a certificate")
	}
	seen := map[string]bool{}
	defaultName := ""
	for i := range vh.JWTProviders {
		p := &vh.JWTProviders[i]
		field := fmt.Sprintf("spec.virtualhost.jwtProviders[%d]", i)
		switch {
		case p.Name == "":
			c.fail(problemJWT, "ProviderNameMissing", "%s.name is required", field)
		case seen[p.Name]:
			c.fail(problemJWT, "DuplicateProviderName", "%s.name %q is used by another provider: give each provider its own name", field, p.Name)
		}
		seen[p.Name] = true
		if p.Default {
			if defaultName != "" {
				c.fail(problemJWT, "MultipleDefaultProvidersSpecified", "%s (%q) and provider %q are both default: at most one provider can be the default", field, p.Name, defaultName)
			} else {
				defaultName = p.Name
			}
		}
		remote, local := p.RemoteJWKS.URI != "", p.LocalJWKS.SecretName != ""
		switch {
		case remote && local:
			c.fail(problemJWT, "JWKSSourceConflict", "%s: set remoteJWKS or localJWKS, not both", field)
		case local:
			if p.LocalJWKS.Key == "" {
				c.fail(problemJWT, "LocalJWKSInvalid", "%s.localJWKS.key is required: the key of Secret %s holding the key set", field, p.LocalJWKS.SecretName)
			}
			if msgs := isDNS1123Subdomain(p.LocalJWKS.SecretName); len(msgs) > 0 {
				c.fail(problemJWT, "LocalJWKSInvalid", "%s.localJWKS.secretName %q: a Secret of the HTTPProxy's namespace: %s", field, p.LocalJWKS.SecretName, strings.Join(msgs, "; "))
			}
		case !remote:
			c.fail(problemJWT, "JWKSSourceMissing", "%s needs remoteJWKS.uri (the URL of the key set that signs its tokens) or localJWKS (a Secret holding it)", field)
		default:
			validateRemoteJWKS(&p.RemoteJWKS, field+".remoteJWKS", c)
		}
	}
}

// validateRemoteJWKS checks a key set's URI, durations and DNS family.
func validateRemoteJWKS(r *contourv1.RemoteJWKS, field string, c *proxyCheck) {
	if _, msg := parseJWKSURI(r.URI); msg != "" {
		c.fail(problemJWT, "RemoteJWKSURIInvalid", "%s.uri %q: %s", field, r.URI, msg)
	} else if r.UpstreamValidation != nil && strings.HasPrefix(strings.ToLower(r.URI), "http:") {
		c.fail(problemJWT, "RemoteJWKSUpstreamValidationInvalid", "%s.validation needs an https uri: a plain HTTP server has no certificate to verify", field)
	}
	if v := r.UpstreamValidation; v != nil {
		problems := upstreamValidationProblems(v)
		for _, msg := range problems {
			c.fail(problemJWT, "RemoteJWKSUpstreamValidationInvalid", "%s.validation.%s", field, msg)
		}
		if msg := validateSecretRef(v.CACertificate); len(problems) == 0 && msg != "" {
			c.fail(problemJWT, "RemoteJWKSUpstreamValidationInvalid", "%s.validation.caSecret: %s", field, msg)
		}
	}
	for _, d := range []struct{ name, value string }{{"timeout", r.Timeout}, {"cacheDuration", r.CacheDuration}} {
		if d.value == "" {
			continue
		}
		if v, err := time.ParseDuration(d.value); err != nil || v <= 0 {
			c.fail(problemJWT, "RemoteJWKSDurationInvalid", "%s.%s %q must be a positive duration such as \"2s\" or \"10m\"", field, d.name, d.value)
		}
	}
	if f := r.DNSLookupFamily; f != "" && !slices.Contains(jwksDNSLookupFamilies, f) {
		c.fail(problemJWT, "RemoteJWKSDNSLookupFamilyInvalid", "%s.dnsLookupFamily %q must be one of %s", field, f, strings.Join(jwksDNSLookupFamilies, ", "))
	}
}

// jwksURI is a key set URI's parts the cluster is made of.
type jwksURI struct {
	scheme, host string
	port         int32
}

// parseJWKSURI parses a key set URI: http or https, with a host that is not
// this machine (the proxy's loopback holds its admin endpoint).
func parseJWKSURI(raw string) (jwksURI, string) {
	u, err := url.Parse(raw)
	if err != nil {
		return jwksURI{}, "not a URL: " + strings.TrimPrefix(err.Error(), "parse "+strconv.Quote(raw)+": ")
	}
	out := jwksURI{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname())}
	switch out.scheme {
	case "http":
		out.port = 80
	case "https":
		out.port = 443
	default:
		return out, "the scheme must be http or https"
	}
	if out.host == "" {
		return out, "the URL has no host"
	}
	if u.User != nil {
		return out, "credentials in the URL are not supported"
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return out, fmt.Sprintf("port %q is not 1-65535", p)
		}
		out.port = int32(n)
	}
	if isThisMachine(out.host) {
		return out, fmt.Sprintf("%s is this machine (a loopback, link-local or unspecified address, or localhost): the proxy never fetches from its own host", out.host)
	}
	return out, ""
}

// validateRouteJWT checks a route's jwtVerificationPolicy on its own; providers
// are the object's own (a root's), nil for an included object, whose root is only
// known when it is served.
func validateRouteJWT(r *contourv1.Route, field string, providers []contourv1.JWTProvider, root bool, c *proxyCheck) {
	p := r.JWTVerificationPolicy
	if p == nil {
		return
	}
	if p.Require != "" && p.Disabled {
		c.fail(problemJWT, "InvalidJWTVerificationPolicy", "%s.jwtVerificationPolicy: set require or disabled, not both", field)
		return
	}
	if root && p.Require != "" && !slices.ContainsFunc(providers, func(jp contourv1.JWTProvider) bool { return jp.Name == p.Require }) {
		c.fail(problemJWT, "JWTProviderNotDefined", "%s.jwtVerificationPolicy.require names provider %q, which spec.virtualhost.jwtProviders does not define%s", field, p.Require, providerNames(providers))
	}
}

func providerNames(providers []contourv1.JWTProvider) string {
	if len(providers) == 0 {
		return " (it defines none)"
	}
	names := make([]string, len(providers))
	for i := range providers {
		names[i] = strconv.Quote(providers[i].Name)
	}
	return " (it defines " + strings.Join(names, ", ") + ")"
}

// proxyJWTProviders resolves a valid root's providers: their key set clusters,
// with the CA Secrets that verify them. ok is false when one cannot be used (the
// root is invalid then: serving the host without the verification it asks for
// would expose what it protects).
func (b *builder) proxyJWTProviders(root *proxyNode) ([]JWTProvider, bool) {
	vh := root.p.Spec.VirtualHost
	if len(vh.JWTProviders) == 0 {
		return nil, true
	}
	out := make([]JWTProvider, 0, len(vh.JWTProviders))
	for i := range vh.JWTProviders {
		p := &vh.JWTProviders[i]
		jp := JWTProvider{Name: p.Name, Issuer: p.Issuer, Audiences: p.Audiences, ForwardJWT: p.ForwardJWT, Default: p.Default}
		var ok bool
		if p.LocalJWKS.SecretName != "" {
			jp.LocalJWKS, ok = b.localJWKS(root, &p.LocalJWKS, fmt.Sprintf("spec.virtualhost.jwtProviders[%d].localJWKS", i))
		} else {
			jp.RemoteJWKS, ok = b.remoteJWKS(root, &p.RemoteJWKS, fmt.Sprintf("spec.virtualhost.jwtProviders[%d].remoteJWKS", i))
		}
		if !ok {
			return nil, false
		}
		out = append(out, jp)
	}
	return out, true
}

// remoteJWKS makes a key set's cluster: the URI's host by DNS (as an ExternalName
// Service), over TLS for https.
func (b *builder) remoteJWKS(root *proxyNode, r *contourv1.RemoteJWKS, field string) (*RemoteJWKS, bool) {
	u, _ := parseJWKSURI(r.URI) // validated
	out := &RemoteJWKS{URI: r.URI, Timeout: DefaultJWKSTimeout, CacheDuration: DefaultJWKSCacheDuration}
	if r.Timeout != "" {
		out.Timeout, _ = time.ParseDuration(r.Timeout)
	}
	if r.CacheDuration != "" {
		out.CacheDuration, _ = time.ParseDuration(r.CacheDuration)
	}
	c := &Cluster{ExternalName: u.host, Port: u.port, DNSLookupFamily: r.DNSLookupFamily}
	if u.scheme == "https" {
		c.Protocol = "tls"
		// Without validation the connection is encrypted, not verified; the server
		// still learns which name is asked for.
		c.UpstreamValidation = &UpstreamValidation{ServerName: u.host}
		if v := r.UpstreamValidation; v != nil {
			uv, ok := b.jwksValidation(root, v, field+".validation")
			if !ok {
				return nil, false
			}
			c.UpstreamValidation = uv
		}
	}
	c.Name = jwksClusterName(u, c)
	out.Cluster = c
	return out, true
}

// localJWKS reads a key set from a Secret of the root's namespace (never
// another's: a key set decides who gets in).
func (b *builder) localJWKS(root *proxyNode, l *contourv1.LocalJWKS, field string) (string, bool) {
	key := types.NamespacedName{Namespace: root.p.Namespace, Name: l.SecretName}
	s := b.store.Secrets[key]
	if s == nil {
		root.check.fail(problemJWT, "LocalJWKSInvalid", "%s: Secret %s not found; create it with the key set under %q", field, key, l.Key)
		return "", false
	}
	data, ok := s.Data[l.Key]
	if !ok {
		root.check.fail(problemJWT, "LocalJWKSInvalid", "%s: Secret %s has no key %q", field, key, l.Key)
		return "", false
	}
	if msg := checkJWKS(data); msg != "" {
		root.check.fail(problemJWT, "LocalJWKSInvalid", "%s: Secret %s, key %q: %s", field, key, l.Key, msg)
		return "", false
	}
	return string(data), true
}

// jwksValidation resolves the CA Secret that verifies a key set server.
func (b *builder) jwksValidation(root *proxyNode, v *contourv1.UpstreamValidation, field string) (*UpstreamValidation, bool) {
	key := types.NamespacedName{Namespace: root.p.Namespace, Name: v.CACertificate}
	if ns, name, ok := strings.Cut(v.CACertificate, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
		if ns != root.p.Namespace && !b.certificateDelegated(key, root.p.Namespace) {
			root.check.fail(problemJWT, "RemoteJWKSCACertificateNotDelegated", "%s.caSecret %q: namespace %s does not delegate Secret %s to namespace %s; add a TLSCertificateDelegation in %s listing it", field, v.CACertificate, ns, name, root.p.Namespace, ns)
			return nil, false
		}
	}
	ca, msg := b.caSecret(key)
	if msg != "" {
		root.check.fail(problemJWT, "RemoteJWKSUpstreamValidationInvalid", "%s.caSecret: %s", field, msg)
		return nil, false
	}
	names := slices.Clone(subjectNames(v))
	return &UpstreamValidation{CAName: key.String(), CACert: ca, SubjectNames: names, ServerName: names[0]}, true
}

// jwksClusterName is upstream HTTPProxy's "dnsname/<scheme>/<host>", with the
// port when it is not the scheme's, and a digest of what else makes the cluster
// when anything does: two roots naming the same host with different CAs or DNS
// families need two clusters.
func jwksClusterName(u jwksURI, c *Cluster) string {
	name := "dnsname/" + u.scheme + "/" + u.host
	if (u.scheme == "http" && u.port != 80) || (u.scheme == "https" && u.port != 443) {
		name += ":" + strconv.Itoa(int(u.port))
	}
	v := c.UpstreamValidation
	if c.DNSLookupFamily == "" && (v == nil || v.CACert == nil) {
		return name
	}
	h := sha256.New()
	h.Write([]byte(c.DNSLookupFamily))
	if v != nil {
		h.Write([]byte{0})
		h.Write(v.CACert)
		for _, n := range v.SubjectNames {
			h.Write([]byte{0})
			h.Write([]byte(n))
		}
	}
	return name + "/" + hex.EncodeToString(h.Sum(nil)[:5])
}

// jwtRequirement is what a route of the walk requires, given the root's
// providers. msg is set when the route names a provider the root lacks: the route
// must then not be served as if it required nothing.
func jwtRequirement(p *contourv1.JWTVerificationPolicy, providers []JWTProvider) (req JWTRequirement, msg string) {
	switch {
	case p != nil && p.Require != "":
		if !slices.ContainsFunc(providers, func(jp JWTProvider) bool { return jp.Name == p.Require }) {
			return req, fmt.Sprintf("jwtVerificationPolicy.require names provider %q, which the root's spec.virtualhost.jwtProviders does not define", p.Require)
		}
		return JWTRequirement{Provider: p.Require}, ""
	case len(providers) == 0:
		return req, ""
	case p != nil && p.Disabled:
		return JWTRequirement{Disabled: true}, ""
	}
	for i := range providers {
		if providers[i].Default {
			return JWTRequirement{Provider: providers[i].Name}, ""
		}
	}
	return req, ""
}

// isThisMachine reports whether a host name or literal is this machine: localhost,
// or a loopback, link-local or unspecified address (IPv4-mapped too).
func isThisMachine(host string) bool {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && (ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified())
}

// checkJWKS says what keeps data from being a JSON Web Key Set with keys, or "".
func checkJWKS(data []byte) string {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return "not a JSON Web Key Set: " + err.Error()
	}
	if len(set.Keys) == 0 {
		return "the key set has no keys"
	}
	return ""
}
