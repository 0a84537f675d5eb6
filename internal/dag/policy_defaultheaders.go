package dag

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// DefaultHeaders are the installation's request and response headers policies
// (Contour's configuration file "policy"): every HTTPProxy service gets them, merged
// into its own policy. A header the service's policy sets keeps the service's value,
// and what the route's policy does comes after the service's and wins, so an object
// always has the last word.
type DefaultHeaders struct {
	Request, Response *contourv1.HeadersPolicy
	// ApplyToIngress gives them to the backends of Ingress rules too (Contour's
	// applyToIngress); IngressRoutes never get them.
	ApplyToIngress bool
}

// CheckDefaultHeaders says what is wrong with d, so that a command line can refuse it
// before anything runs: the rules of an HTTPProxy service's headers policies, and no
// Server (--server-header-transformation decides it).
func CheckDefaultHeaders(d DefaultHeaders) error {
	var errs []error
	for _, p := range []struct {
		what    string
		policy  *contourv1.HeadersPolicy
		request bool
	}{{"request headers", d.Request, true}, {"response headers", d.Response, false}} {
		if p.policy == nil {
			continue
		}
		for _, h := range p.policy.Set {
			name := http.CanonicalHeaderKey(h.Name)
			switch msg := headerNameProblem(h.Name, p.request, true); {
			case msg != "":
				errs = append(errs, fmt.Errorf("%s: set %q: %s", p.what, h.Name, msg))
			case strings.ContainsAny(h.Value, "\r\n\x00"):
				errs = append(errs, fmt.Errorf("%s: set %q: the value may not contain CR, LF or NUL", p.what, h.Name))
			case name == "Host" && hostFromHeader.MatchString(h.Value):
				errs = append(errs, fmt.Errorf("%s: set Host %q: the Host of every service's requests cannot come from a request header (only an HTTPProxy route's requestHeadersPolicy can do that); set a host name", p.what, h.Value))
			case name == "Server":
				errs = append(errs, fmt.Errorf("%s: set Server: the Server header is --server-header-transformation's (serverHeaderTransformation)", p.what))
			}
		}
		for _, name := range p.policy.Remove {
			if msg := headerNameProblem(name, p.request, false); msg != "" {
				errs = append(errs, fmt.Errorf("%s: remove %q: %s", p.what, name, msg))
			} else if http.CanonicalHeaderKey(name) == "Server" {
				errs = append(errs, fmt.Errorf("%s: remove Server: the Server header is --server-header-transformation's (serverHeaderTransformation)", p.what))
			}
		}
	}
	return errors.Join(errs...)
}

// withDefaultHeaders is the service's headers policy own (nil: none) with the
// installation's def (translated for the service: proxyHeadersPolicy) added: def's
// headers that own neither sets nor removes.
func withDefaultHeaders(own, def *HeadersPolicy) *HeadersPolicy {
	if def == nil {
		return own
	}
	out := &HeadersPolicy{}
	if own != nil {
		out = &HeadersPolicy{Set: slices.Clone(own.Set), Add: slices.Clone(own.Add), Remove: slices.Clone(own.Remove)}
	}
	owns := func(name string) bool {
		return slices.Contains(out.Remove, name) ||
			slices.ContainsFunc(out.Set, func(h HeaderValue) bool { return h.Name == name }) ||
			slices.ContainsFunc(out.Add, func(h HeaderValue) bool { return h.Name == name })
	}
	var set []HeaderValue
	for _, h := range def.Set {
		if !owns(h.Name) {
			set = append(set, h)
		}
	}
	var remove []string
	for _, name := range def.Remove {
		if !owns(name) {
			remove = append(remove, name)
		}
	}
	out.Set, out.Remove = append(out.Set, set...), append(out.Remove, remove...)
	return out
}

// serviceDefaultHeaders merges the installation's headers policies into a service's
// (wc) of namespace ns, translated for that service (%CONTOUR_SERVICE_NAME% and the
// like).
func (b *builder) serviceDefaultHeaders(wc *WeightedCluster, ns, svc string, port int) {
	d := b.opts.DefaultHeaders
	if d.Request == nil && d.Response == nil {
		return
	}
	// CheckDefaultHeaders refused what these would fail on: the check collects nothing.
	var c proxyCheck
	if d.Request != nil {
		def, _ := proxyHeadersPolicy(d.Request, "policy.request-headers", true, ns, svc, port, false, &c)
		wc.RequestHeaders = withDefaultHeaders(wc.RequestHeaders, def)
	}
	if d.Response != nil {
		def, _ := proxyHeadersPolicy(d.Response, "policy.response-headers", false, ns, svc, port, false, &c)
		wc.ResponseHeaders = withDefaultHeaders(wc.ResponseHeaders, def)
	}
}
