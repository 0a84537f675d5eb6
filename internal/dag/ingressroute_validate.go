package dag

import (
	"fmt"
	"math"
	"strings"
	"time"

	ingressroutev1 "github.com/portico-dev/portico/apis/contour/v1beta1"
)

// Health check defaults (seed 003).
const (
	DefaultHealthCheckHost      = "contour-envoy-healthcheck"
	defaultHealthCheckInterval  = 5 * time.Second
	defaultHealthCheckTimeout   = 2 * time.Second
	defaultUnhealthyThreshold   = 3
	defaultHealthyThreshold     = 2
	maxHealthCheckSeconds       = 24 * 60 * 60
	maxHealthCheckThresholdSize = 1000
)

// validateIngressRoute returns every problem that makes the object unusable on its own,
// whatever the rest of the graph holds. Any one of them rejects the whole object.
func validateIngressRoute(ir *ingressroutev1.IngressRoute) []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	spec := &ir.Spec
	if vh := spec.VirtualHost; vh != nil {
		errs = append(errs, validateVirtualHost(vh)...)
	}
	if spec.Strategy != "" && !validStrategy(spec.Strategy) {
		add("spec.strategy %q is not one of %s", spec.Strategy, strategyNames())
	}
	if spec.HealthCheck != nil {
		for _, e := range validateHealthCheck(spec.HealthCheck) {
			add("spec.healthCheck: %s", e)
		}
	}
	if len(spec.Routes) == 0 {
		add("spec.routes is empty: an IngressRoute needs at least one route")
	}
	seen := map[string]int{}
	for i := range spec.Routes {
		r := &spec.Routes[i]
		if j, dup := seen[r.Match]; dup {
			add("spec.routes[%d] and spec.routes[%d] both match %q: give each prefix one route", j, i, r.Match)
		} else {
			seen[r.Match] = i
		}
		for _, e := range validateRoute(r) {
			add("spec.routes[%d] (match %q): %s", i, r.Match, e)
		}
	}
	return errs
}

func validateVirtualHost(vh *ingressroutev1.VirtualHost) []string {
	var errs []string
	hosts := map[string]bool{}
	for i, h := range append([]string{vh.Fqdn}, vh.Aliases...) {
		field := "spec.virtualhost.fqdn"
		if i > 0 {
			field = fmt.Sprintf("spec.virtualhost.aliases[%d]", i-1)
		}
		if e := validateFQDN(h); e != "" {
			errs = append(errs, fmt.Sprintf("%s %q %s", field, h, e))
			continue
		}
		lh := strings.ToLower(h)
		if hosts[lh] {
			errs = append(errs, fmt.Sprintf("%s %q repeats a host name of this virtualhost", field, h))
		}
		hosts[lh] = true
	}
	if t := vh.TLS; t != nil {
		if e := validateSecretRef(t.SecretName); e != "" {
			errs = append(errs, "spec.virtualhost.tls.secretName "+e)
		}
		switch t.MinimumProtocolVersion {
		case "", "1.1", "1.2", "1.3":
		default:
			errs = append(errs, fmt.Sprintf("spec.virtualhost.tls.minimumProtocolVersion %q is not one of \"1.1\", \"1.2\", \"1.3\"", t.MinimumProtocolVersion))
		}
	}
	return errs
}

// validateFQDN says what is wrong with a virtual host name, or "".
func validateFQDN(h string) string {
	switch {
	case h == "":
		return "is empty: set the host name this IngressRoute serves"
	case strings.Contains(h, "*"):
		return "has a wildcard: IngressRoute virtual hosts are fully qualified names"
	}
	if errs := isDNS1123Subdomain(strings.ToLower(h)); len(errs) > 0 {
		return "is not a valid host name: " + strings.Join(errs, "; ")
	}
	return ""
}

// validateSecretRef checks "name" or "namespace/name".
func validateSecretRef(ref string) string {
	if ref == "" {
		return "is empty"
	}
	ns, name, delegated := strings.Cut(ref, "/")
	if !delegated {
		name = ns
	} else if errs := isDNS1123Label(ns); len(errs) > 0 {
		return fmt.Sprintf("%q: namespace %q is not valid: %s", ref, ns, strings.Join(errs, "; "))
	}
	if errs := isDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Sprintf("%q: %q is not a valid Secret name: %s", ref, name, strings.Join(errs, "; "))
	}
	return ""
}

func validateRoute(r *ingressroutev1.Route) []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if e := validateMatch(r.Match); e != "" {
		add("match %s", e)
	}
	services := r.AllServices()
	switch {
	case len(r.Services) > 0 && len(r.Service) > 0:
		add("both services and service are set: use services (service is an alternative spelling)")
	case len(services) > 0 && r.Delegate != nil:
		add("both services and delegate are set: a route either sends to services or delegates")
	case len(services) == 0 && r.Delegate == nil:
		add("has neither services nor delegate")
	}
	if d := r.Delegate; d != nil {
		if errs := isDNS1123Subdomain(d.Name); len(errs) > 0 {
			add("delegate.name %q is not valid: %s", d.Name, strings.Join(errs, "; "))
		}
		if d.Namespace != "" {
			if errs := isDNS1123Label(d.Namespace); len(errs) > 0 {
				add("delegate.namespace %q is not valid: %s", d.Namespace, strings.Join(errs, "; "))
			}
		}
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"prefixRewrite", r.PrefixRewrite != ""},
			{"timeoutPolicy", r.TimeoutPolicy != nil},
			{"retryPolicy", r.RetryPolicy != nil},
			{"permitInsecure", r.PermitInsecure},
		} {
			if f.set {
				add("%s is set on a delegating route: set it on the routes of the delegated IngressRoute", f.name)
			}
		}
	}
	if r.PrefixRewrite != "" {
		if e := validateMatch(r.PrefixRewrite); e != "" {
			add("prefixRewrite %s", e)
		}
	}
	if rp := r.RetryPolicy; rp != nil && rp.Count != nil && rp.MaxRetries != nil {
		add("retryPolicy sets both count and maxRetries: keep count (maxRetries is an alternative spelling)")
	}
	var total uint64
	for j := range services {
		s := &services[j]
		for _, e := range validateService(s) {
			add("service %d (%q): %s", j, s.Name, e)
		}
		if s.Weight != nil && *s.Weight > 0 {
			total += uint64(*s.Weight)
		}
	}
	if total > math.MaxUint32 {
		add("the weights of the services add up to %d, more than %d", total, uint64(math.MaxUint32))
	}
	return errs
}

// validateMatch checks a path prefix.
func validateMatch(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("%q must start with \"/\"", p)
	case strings.ContainsAny(p, "?#"):
		return fmt.Sprintf("%q must be a path: no query or fragment", p)
	}
	for i := 0; i < len(p); i++ {
		// Paths are ASCII on the wire; anything else must be percent-encoded.
		if c := p[i]; c <= ' ' || c >= 0x7f {
			return fmt.Sprintf("%q must be a path of printable ASCII characters: percent-encode the others", p)
		}
	}
	return ""
}

func validateService(s *ingressroutev1.Service) []string {
	var errs []string
	if es := isDNS1035Label(s.Name); len(es) > 0 {
		errs = append(errs, fmt.Sprintf("name %q is not a Service name: %s", s.Name, strings.Join(es, "; ")))
	}
	if s.Port < 1 || s.Port > 65535 {
		errs = append(errs, fmt.Sprintf("port %d is not in 1-65535", s.Port))
	}
	if s.Weight != nil && (*s.Weight < 0 || *s.Weight > math.MaxUint32) {
		errs = append(errs, fmt.Sprintf("weight %d is not in 0-%d", *s.Weight, uint64(math.MaxUint32)))
	}
	if s.Strategy != "" && !validStrategy(s.Strategy) {
		errs = append(errs, fmt.Sprintf("strategy %q is not one of %s", s.Strategy, strategyNames()))
	}
	if s.HealthCheck != nil {
		for _, e := range validateHealthCheck(s.HealthCheck) {
			errs = append(errs, "healthCheck: "+e)
		}
	}
	return errs
}

func validateHealthCheck(hc *ingressroutev1.HealthCheck) []string {
	var errs []string
	if e := validateMatch(hc.Path); e != "" {
		errs = append(errs, "path "+e)
	}
	if hc.Host != "" {
		if es := isDNS1123Subdomain(strings.ToLower(hc.Host)); len(es) > 0 {
			errs = append(errs, fmt.Sprintf("host %q is not a host name: %s", hc.Host, strings.Join(es, "; ")))
		}
	}
	for _, f := range []struct {
		name  string
		value int64
		max   int64
	}{
		{"intervalSeconds", hc.IntervalSeconds, maxHealthCheckSeconds},
		{"timeoutSeconds", hc.TimeoutSeconds, maxHealthCheckSeconds},
		{"unhealthyThresholdCount", hc.UnhealthyThresholdCount, maxHealthCheckThresholdSize},
		{"healthyThresholdCount", hc.HealthyThresholdCount, maxHealthCheckThresholdSize},
	} {
		if f.value < 0 || f.value > f.max {
			errs = append(errs, fmt.Sprintf("%s %d is not in 0-%d (0 means the default)", f.name, f.value, f.max))
		}
	}
	return errs
}

// healthCheck applies the seed's defaults to a validated health check.
func healthCheck(hc *ingressroutev1.HealthCheck) *HealthCheck {
	if hc == nil {
		return nil
	}
	out := &HealthCheck{
		Path:               hc.Path,
		Host:               hc.Host,
		Interval:           time.Duration(hc.IntervalSeconds) * time.Second,
		Timeout:            time.Duration(hc.TimeoutSeconds) * time.Second,
		UnhealthyThreshold: uint32(hc.UnhealthyThresholdCount),
		HealthyThreshold:   uint32(hc.HealthyThresholdCount),
	}
	if out.Host == "" {
		out.Host = DefaultHealthCheckHost
	}
	if out.Interval == 0 {
		out.Interval = defaultHealthCheckInterval
	}
	if out.Timeout == 0 {
		out.Timeout = defaultHealthCheckTimeout
	}
	if out.UnhealthyThreshold == 0 {
		out.UnhealthyThreshold = defaultUnhealthyThreshold
	}
	if out.HealthyThreshold == 0 {
		out.HealthyThreshold = defaultHealthyThreshold
	}
	return out
}

var strategies = []LoadBalancer{LBRoundRobin, LBWeightedLeastRequest, LBRingHash, LBMaglev, LBRandom}

func validStrategy(s string) bool {
	for _, v := range strategies {
		if string(v) == s {
			return true
		}
	}
	return false
}

func strategyNames() string {
	names := make([]string, len(strategies))
	for i, s := range strategies {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}
