package dag

import (
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// validateIngress returns every reason ing cannot be served, each naming the field and
// what to do. An empty result means the Ingress is well-formed.
func validateIngress(ing *networkingv1.Ingress) []string {
	var errs []string
	if db := ing.Spec.DefaultBackend; db != nil {
		errs = append(errs, validateBackend(func() string { return "spec.defaultBackend" }, db)...)
	}
	// Field names are formatted only for the messages: a valid Ingress needs none.
	for i, rule := range ing.Spec.Rules {
		if rule.Host != "" {
			if err := validateHost(rule.Host); err != "" {
				errs = append(errs, fmt.Sprintf("spec.rules[%d].host %q: %s", i, rule.Host, err))
			}
		}
		if rule.HTTP == nil {
			continue
		}
		for j, p := range rule.HTTP.Paths {
			if err := validatePath(pathTypeOf(p), p.Path); err != "" {
				errs = append(errs, fmt.Sprintf("spec.rules[%d].http.paths[%d].path %q: %s", i, j, p.Path, err))
			}
			errs = append(errs, validateBackend(func() string { return fmt.Sprintf("spec.rules[%d].http.paths[%d].backend", i, j) }, &p.Backend)...)
		}
	}
	for i, t := range ing.Spec.TLS {
		for j, h := range t.Hosts {
			if err := validateHost(h); err != "" {
				errs = append(errs, fmt.Sprintf("spec.tls[%d].hosts[%d] %q: %s", i, j, h, err))
			}
		}
	}
	return errs
}

func pathTypeOf(p networkingv1.HTTPIngressPath) networkingv1.PathType {
	if p.PathType == nil {
		return networkingv1.PathTypeImplementationSpecific
	}
	return *p.PathType
}

// validateHost checks a precise host or a "*.suffix" wildcard whose "*" is a whole first label.
func validateHost(host string) string {
	if host == "*" {
		return `a wildcard must be followed by a domain, as in "*.example.com"`
	}
	if isIP(host) {
		return "hosts must be DNS names, not IP addresses"
	}
	if strings.HasPrefix(host, "*.") {
		if msgs := isWildcardDNS1123Subdomain(host); len(msgs) > 0 {
			return strings.Join(msgs, "; ")
		}
		return ""
	}
	if strings.Contains(host, "*") {
		return `"*" may only appear alone as the first label, as in "*.example.com"`
	}
	if msgs := isDNS1123Subdomain(host); len(msgs) > 0 {
		return strings.Join(msgs, "; ")
	}
	return ""
}

// validatePath applies seed 000's syntax rules (absolute, no consecutive slashes) and the
// rules the API server applies to v1 paths, plus what a path must not contain to be a
// valid route match (query, fragment, whitespace, control characters).
func validatePath(pt networkingv1.PathType, path string) string {
	switch pt {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
	default:
		return fmt.Sprintf("pathType %q is not one of Exact, Prefix, ImplementationSpecific", pt)
	}
	if path == "" && pt == networkingv1.PathTypeImplementationSpecific {
		return "" // defaults to "/"
	}
	switch {
	case path == "":
		return `a path is required for pathType ` + string(pt) + `; use "/" to match everything`
	case !strings.HasPrefix(path, "/"):
		return `must begin with "/"`
	case strings.Contains(path, "//"):
		return `must not contain consecutive "/" characters`
	case strings.ContainsAny(path, "?#"):
		return `must not contain "?" or "#": the query and fragment are not part of the matched path`
	}
	for _, r := range path {
		if r <= ' ' || r == 0x7f {
			return "must not contain spaces or control characters; percent-encode them"
		}
	}
	for _, bad := range []string{"/./", "/../", "%2f", "%2F"} {
		if strings.Contains(path, bad) {
			return fmt.Sprintf("must not contain %q", bad)
		}
	}
	if strings.HasSuffix(path, "/..") || strings.HasSuffix(path, "/.") {
		return `must not end with "/." or "/.."`
	}
	return ""
}

// validateBackend checks that exactly one of service and resource is set, and that a service
// backend names a port by number or by name. field names the backend in messages.
func validateBackend(field func() string, be *networkingv1.IngressBackend) []string {
	switch {
	case be.Service != nil && be.Resource != nil:
		return []string{field() + ": set either service or resource, not both"}
	case be.Resource != nil:
		r := be.Resource
		group := ""
		if r.APIGroup != nil {
			group = *r.APIGroup
		}
		return []string{fmt.Sprintf("%s.resource: backends of kind %q (apiGroup %q) are not supported by Portico; use a Service backend", field(), r.Kind, group)}
	case be.Service == nil:
		return []string{field() + ": a service backend is required"}
	}
	svc := be.Service
	var errs []string
	if msgs := isDNS1035Label(svc.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("%s.service.name %q: %s", field(), svc.Name, strings.Join(msgs, "; ")))
	}
	p := svc.Port
	switch {
	case p.Name != "" && p.Number != 0:
		errs = append(errs, field()+".service.port: set either number or name, not both")
	case p.Name == "" && (p.Number < 1 || p.Number > 65535):
		errs = append(errs, fmt.Sprintf("%s.service.port.number %d: must be between 1 and 65535 (or set port.name)", field(), p.Number))
	case p.Name != "":
		if msgs := isValidPortName(p.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Sprintf("%s.service.port.name %q: %s", field(), p.Name, strings.Join(msgs, "; ")))
		}
	}
	return errs
}
