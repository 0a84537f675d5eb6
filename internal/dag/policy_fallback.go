package dag

// fallbackHostName is the secure host whose certificate, the fallback certificate,
// clients get when they send no server name or one no host has (its filter chain has
// no server names): the roots that enable it are its Also hosts, so a request reaches
// its host's routes by its Host header.
const fallbackHostName = "*"

// proxyFallback resolves the fallback certificate for a root that enables it; ok is
// false when the root cannot be served (it asks for what cannot be given).
func (b *builder) proxyFallback(root *proxyNode) (*Secret, bool) {
	t := root.p.Spec.VirtualHost.TLS
	if t == nil || !t.EnableFallbackCertificate || t.Passthrough {
		return nil, true
	}
	key := b.opts.FallbackCertificate
	if key == nil {
		root.check.fail(problemTLS, "FallbackNotPresent", "spec.virtualhost.tls.enableFallbackCertificate: no fallback certificate is configured; start Portico with --fallback-certificate NAMESPACE/NAME, or remove the field")
		return nil, false
	}
	secret, err := b.tlsSecret(*key)
	if err != nil {
		root.check.fail(problemTLS, "FallbackNotValid", "spec.virtualhost.tls.enableFallbackCertificate: the fallback certificate %s cannot be used: %v", key, err)
		return nil, false
	}
	return secret, true
}

// addToFallback serves svh's routes to the clients of the fallback certificate too.
func (b *builder) addToFallback(svh *SecureVirtualHost, secret *Secret) {
	fb := b.svhosts[fallbackHostName]
	if fb == nil {
		fb = &SecureVirtualHost{VirtualHost: VirtualHost{Name: fallbackHostName}, Secret: secret, MinTLSVersion: DefaultProxyMinTLSVersion}
		b.svhosts[fallbackHostName] = fb
	}
	// A host under the fallback certificate has no server of its own (they are
	// refused together): only the installation's, the same for every host.
	if svh.Authorization != nil {
		fb.Authorization = svh.Authorization
	}
	fb.Also = append(fb.Also, &svh.VirtualHost)
	b.alsoChanged = true
}

// fallbackProblem says why a TLS block cannot enable the fallback certificate, or "".
func fallbackProblem(hasClientValidation, passthrough bool) string {
	switch {
	case passthrough:
		return "needs Portico to terminate TLS: with passthrough the backend presents its own certificate"
	case hasClientValidation:
		return "cannot be used with clientValidation: a client without a server name would get in without its certificate being asked for"
	}
	return ""
}
