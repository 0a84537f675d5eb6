package dag

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// HTTPProxy defaults, as HTTPProxy users know them.
const (
	// DefaultProxyMinTLSVersion is an HTTPProxy root's minimumProtocolVersion when unset.
	DefaultProxyMinTLSVersion = "1.2"
	// AffinityCookie is the cookie that the Cookie load-balancing strategy sets.
	AffinityCookie = "X-Contour-Session-Affinity"
	// maxDirectResponseBody is Envoy's default limit on a direct response body.
	maxDirectResponseBody = 4096
)

// failurePolicy defaults (seed 004, DESIGN.md).
const (
	defaultFailureCount          = 1
	defaultConsecutive5xx        = 5
	defaultOutlierInterval       = 10 * time.Second
	defaultBaseEjectionTime      = 30 * time.Second
	defaultMaxEjectionPercent    = 50
	defaultProxyRetryOn          = "5xx"
	defaultProxyHealthInterval   = 5 * time.Second
	defaultProxyHealthTimeout    = 2 * time.Second
	defaultProxyUnhealthyThresh  = 3
	defaultProxyHealthyThreshold = 2
)

// routePlan is what one HTTPProxy route becomes before its conditions are merged with
// those of the includes that lead to it: everything but the path and extra conditions.
type routePlan struct {
	conds          conditions
	permitInsecure bool
	tmpl           *Route
	rewrite        *contourv1.PathRewritePolicy
	jwt            *contourv1.JWTVerificationPolicy
	// used says that tmpl was handed out: the next route is a copy.
	used bool
}

// build returns the route under merged conditions. Most objects are reached once, so
// the template itself is the first route.
func (p *routePlan) build(merged conditions) *Route {
	route := p.tmpl
	if p.used {
		cp := *p.tmpl
		route = &cp
	}
	p.used = true
	route.Path, route.Headers, route.Query = merged.path, merged.headers, merged.query
	if p.rewrite != nil {
		route.PrefixRewrite = pickPrefixRewrite(p.rewrite, merged.path.Value)
	}
	return route
}

// proxyRoutePlans checks and translates the routes of n, whose conditions are conds. A
// route with a problem makes n invalid (through c); the plans are only used when n is
// valid.
func (b *builder) proxyRoutePlans(n *proxyNode, conds []conditions, c *proxyCheck) []routePlan {
	out := make([]routePlan, len(n.p.Spec.Routes))
	for i := range n.p.Spec.Routes {
		r := &n.p.Spec.Routes[i]
		out[i] = routePlan{
			conds:          conds[i],
			permitInsecure: r.PermitInsecure,
			tmpl:           b.proxyRoute(n, r, indexedField("spec.routes", i), conds[i], c),
			rewrite:        r.PathRewritePolicy,
			jwt:            r.JWTVerificationPolicy,
		}
	}
	return out
}

// proxyRoute translates everything of r that does not depend on where it is included.
func (b *builder) proxyRoute(n *proxyNode, r *contourv1.Route, field string, conds conditions, c *proxyCheck) *Route {
	out := &Route{Source: n.ref, Websocket: r.EnableWebsockets}
	out.IPFilter = proxyIPFilter(r.IPAllowFilterPolicy, r.IPDenyFilterPolicy, field, c)
	out.Timeouts = proxyTimeouts(r.TimeoutPolicy, field, c)
	out.Retry = proxyRetry(r, out.Timeouts, field, c)
	out.RateLimit = proxyRateLimit(r.RateLimitPolicy, field+".rateLimitPolicy", c)
	if r.RequestHeadersPolicy != nil {
		var host hostRewrite
		out.RequestHeaders, host = proxyHeadersPolicy(r.RequestHeadersPolicy, field+".requestHeadersPolicy", true, n.p.Namespace, "", 0, true, c)
		out.HostRewrite, out.HostRewriteHeader = host.literal, host.header
	}
	if r.ResponseHeadersPolicy != nil {
		out.ResponseHeaders, _ = proxyHeadersPolicy(r.ResponseHeadersPolicy, field+".responseHeadersPolicy", false, n.p.Namespace, "", 0, true, c)
	}
	if p := r.PathRewritePolicy; p != nil {
		validatePathRewrite(p, conds, field, c)
	}
	switch {
	case r.RequestRedirectPolicy != nil:
		out.Redirect = proxyRedirect(r.RequestRedirectPolicy, field, c)
	case r.DirectResponsePolicy != nil:
		d := r.DirectResponsePolicy
		if d.StatusCode < 200 || d.StatusCode > 599 {
			c.fail(problemRoute, "DirectResponseInvalid", "%s.directResponsePolicy.statusCode %d must be 200-599", field, d.StatusCode)
		}
		if len(d.Body) > maxDirectResponseBody {
			c.fail(problemRoute, "DirectResponseInvalid", "%s.directResponsePolicy.body is %d bytes; at most %d", field, len(d.Body), maxDirectResponseBody)
		}
		out.DirectStatus, out.DirectBody = uint32(d.StatusCode), d.Body
	default:
		var pol clusterPolicy
		if r.LoadBalancerPolicy != nil {
			pol.lb, out.HashPolicies = proxyLoadBalancer(r.LoadBalancerPolicy, field+".loadBalancerPolicy", c)
		}
		if r.HealthCheckPolicy != nil {
			pol.hc = proxyHealthCheck(r.HealthCheckPolicy, field+".healthCheckPolicy", c)
		}
		if r.TimeoutPolicy != nil && r.TimeoutPolicy.IdleConnection != "" {
			pol.idleConn = proxyDuration(r.TimeoutPolicy.IdleConnection, field+".timeoutPolicy.idleConnection", c)
		}
		if r.FailurePolicy != nil {
			pol.outlier = proxyOutlier(r.FailurePolicy, field+".failurePolicy", c)
		}
		out.Clusters = b.proxyServices(n, r.Services, field, pol, true, c)
		out.Mirrors = b.proxyMirrors(n, r.Services, field, pol, c)
		out.CookieRewrites = proxyCookieRewrites(r.CookieRewritePolicies)
		out.InternalRedirect = proxyInternalRedirect(r.InternalRedirectPolicy)
		liftServerHeader(out, r.Services, field, c)
	}
	return out
}

// proxyDuration parses a policy duration: "infinity" (or "infinite") is 0, no limit.
func proxyDuration(v, field string, c *proxyCheck) *time.Duration {
	if v == "" {
		return nil
	}
	if v == "infinity" || v == "infinite" {
		return durationPtr(0)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		c.fail(problemRoute, "DurationInvalid", "%s %q is not a duration (e.g. \"10s\", \"1m30s\", or \"infinity\")", field, v)
		return nil
	}
	return &d
}

func proxyTimeouts(tp *contourv1.TimeoutPolicy, field string, c *proxyCheck) *TimeoutPolicy {
	if tp == nil {
		return nil
	}
	req := proxyDuration(tp.Response, field+".timeoutPolicy.response", c)
	idle := proxyDuration(tp.Idle, field+".timeoutPolicy.idle", c)
	if req == nil && idle == nil {
		return nil
	}
	return &TimeoutPolicy{Request: req, Idle: idle}
}

// envoyRetryOn are the retry conditions a retryPolicy may name.
var envoyRetryOn = []string{
	"5xx", "gateway-error", "reset", "connect-failure", "retriable-4xx", "refused-stream",
	"retriable-status-codes", "cancelled", "deadline-exceeded", "internal",
	"resource-exhausted", "unavailable",
}

// proxyRetry merges retryPolicy and failurePolicy's retries (at most one of them).
func proxyRetry(r *contourv1.Route, timeouts *TimeoutPolicy, field string, c *proxyCheck) *RetryPolicy {
	fp := r.FailurePolicy
	fpRetries := fp != nil && (fp.RetryPolicyEnabled == nil || *fp.RetryPolicyEnabled)
	if r.RetryPolicy != nil && fpRetries {
		c.fail(problemRoute, "RetryPolicyConflict", "%s sets both retryPolicy and failurePolicy, which retries too (retryPolicyEnabled defaults to true): use one of them (or set failurePolicy.retryPolicyEnabled: false)", field)
		return nil
	}
	switch {
	case r.RetryPolicy != nil:
		rp := r.RetryPolicy
		if rp.NumRetries < -1 {
			c.fail(problemRoute, "RetryPolicyInvalid", "%s.retryPolicy.count %d must be -1 (no retries) or more", field, rp.NumRetries)
			return nil
		}
		if rp.NumRetries == -1 {
			return nil // turns retries off
		}
		n := uint32(rp.NumRetries)
		if n == 0 {
			n = 1
		}
		return retryPolicy(n, rp.PerTryTimeout, retryOnStrings(rp.RetryOn), rp.RetriableStatusCodes, timeouts, field+".retryPolicy", c)
	case fpRetries:
		n := uint32(defaultFailureCount)
		if fp.Count != nil {
			if *fp.Count < 0 || *fp.Count > 100 {
				c.fail(problemRoute, "FailurePolicyInvalid", "%s.failurePolicy.count %d must be 0-100", field, *fp.Count)
				return nil
			}
			n = uint32(*fp.Count)
		}
		if n == 0 {
			return nil
		}
		return retryPolicy(n, fp.PerTryTimeout, retryOnStrings(fp.RetryOn), nil, timeouts, field+".failurePolicy", c)
	}
	return nil
}

func retryOnStrings[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

func retryPolicy(n uint32, perTry string, retryOn []string, codes []uint32, timeouts *TimeoutPolicy, field string, c *proxyCheck) *RetryPolicy {
	rp := &RetryPolicy{NumRetries: n, RetryOn: retryOn}
	if len(rp.RetryOn) == 0 {
		rp.RetryOn = []string{defaultProxyRetryOn}
	}
	for _, on := range rp.RetryOn {
		if !slices.Contains(envoyRetryOn, on) {
			c.fail(problemRoute, "RetryOnInvalid", "%s.retryOn %q is not one of %s", field, on, strings.Join(envoyRetryOn, ", "))
		}
	}
	if len(codes) > 0 {
		if !slices.Contains(rp.RetryOn, "retriable-status-codes") {
			c.fail(problemRoute, "RetryOnInvalid", "%s.retriableStatusCodes needs \"retriable-status-codes\" in retryOn", field)
		}
		for _, code := range codes {
			if code < 100 || code > 599 {
				c.fail(problemRoute, "RetryOnInvalid", "%s.retriableStatusCodes: %d is not an HTTP status", field, code)
			}
		}
		rp.OnStatusCodes = slices.Clone(codes)
	}
	rp.RetryOn = slices.DeleteFunc(slices.Clone(rp.RetryOn), func(s string) bool { return s == "retriable-status-codes" })
	if d := proxyDuration(perTry, field+".perTryTimeout", c); d != nil {
		rp.PerTryTimeout = *d
		if timeouts != nil && timeouts.Request != nil && *timeouts.Request > 0 && *d > *timeouts.Request {
			c.warn(problemRoute, "PerTryTimeoutIgnored", "%s.perTryTimeout %s is longer than timeoutPolicy.response (%s): each try is cut short by it", field, *d, *timeouts.Request)
		}
	}
	return rp
}

// proxyOutlier is the passive health check of failurePolicy, on by default.
func proxyOutlier(fp *contourv1.FailurePolicy, field string, c *proxyCheck) *OutlierDetection {
	if fp == nil || (fp.PassiveHealthCheckEnabled != nil && !*fp.PassiveHealthCheckEnabled) {
		return nil
	}
	o := &OutlierDetection{
		Consecutive5xx:     defaultConsecutive5xx,
		Interval:           defaultOutlierInterval,
		BaseEjectionTime:   defaultBaseEjectionTime,
		MaxEjectionPercent: defaultMaxEjectionPercent,
	}
	if fp.Consecutive5xx != nil {
		if *fp.Consecutive5xx < 1 || *fp.Consecutive5xx > 1000 {
			c.fail(problemRoute, "FailurePolicyInvalid", "%s.consecutive5xx %d must be 1-1000", field, *fp.Consecutive5xx)
		} else {
			o.Consecutive5xx = uint32(*fp.Consecutive5xx)
		}
	}
	for _, d := range []struct {
		name, value string
		into        *time.Duration
	}{{"interval", fp.Interval, &o.Interval}, {"baseEjectionTime", fp.BaseEjectionTime, &o.BaseEjectionTime}} {
		if v := proxyDuration(d.value, field+"."+d.name, c); v != nil {
			if *v <= 0 {
				c.fail(problemRoute, "FailurePolicyInvalid", "%s.%s must be positive", field, d.name)
			} else {
				*d.into = *v
			}
		}
	}
	if fp.MaxEjectionPercent != nil {
		if *fp.MaxEjectionPercent < 0 || *fp.MaxEjectionPercent > 100 {
			c.fail(problemRoute, "FailurePolicyInvalid", "%s.maxEjectionPercent %d must be 0-100", field, *fp.MaxEjectionPercent)
		} else {
			o.MaxEjectionPercent = uint32(*fp.MaxEjectionPercent)
		}
	}
	return o
}

// proxyLoadBalancer maps a load-balancing strategy and its hash policies.
func proxyLoadBalancer(lbp *contourv1.LoadBalancerPolicy, field string, c *proxyCheck) (LoadBalancer, []HashPolicy) {
	if lbp == nil {
		return "", nil
	}
	switch lbp.Strategy {
	case "", "RoundRobin":
		return "", nil
	case "WeightedLeastRequest":
		return LBWeightedLeastRequest, nil
	case "Random":
		return LBRandom, nil
	case "Cookie":
		return LBRingHash, []HashPolicy{{Cookie: AffinityCookie, CookiePath: "/", CookieGenerate: true}}
	case "RequestHash":
		var hashes []HashPolicy
		for i, h := range lbp.RequestHashPolicies {
			at := fmt.Sprintf("%s.requestHashPolicies[%d]", field, i)
			set := 0
			hp := HashPolicy{Terminal: h.Terminal}
			if h.HeaderHashOptions != nil {
				set++
				hp.Header = strings.ToLower(h.HeaderHashOptions.HeaderName)
				if !validHeaderName(hp.Header) {
					c.fail(problemRoute, "HashPolicyInvalid", "%s.headerHashOptions.headerName %q is not a valid header name", at, h.HeaderHashOptions.HeaderName)
				}
			}
			if h.QueryParameterHashOptions != nil {
				set++
				hp.QueryParameter = h.QueryParameterHashOptions.ParameterName
				if hp.QueryParameter == "" {
					c.fail(problemRoute, "HashPolicyInvalid", "%s.queryParameterHashOptions.parameterName is required", at)
				}
			}
			if h.HashSourceIP {
				set++
				hp.SourceIP = true
			}
			if set != 1 {
				c.fail(problemRoute, "HashPolicyInvalid", "%s must set exactly one of headerHashOptions, queryParameterHashOptions, hashSourceIP", at)
				continue
			}
			hashes = append(hashes, hp)
		}
		if len(hashes) == 0 {
			// The translator gives a consistent-hashing cluster without hash policies
			// the client address to hash (xds/translate hashesClient).
			c.warn(problemRoute, "HashPolicyMissing", "%s: strategy RequestHash without requestHashPolicies hashes the client address (as hashSourceIP: true does); add requestHashPolicies to hash a header or query parameter instead", field)
		}
		return LBRingHash, hashes
	default:
		c.fail(problemRoute, "LoadBalancerStrategyInvalid", "%s.strategy %q is not one of RoundRobin, WeightedLeastRequest, Random, Cookie, RequestHash", field, lbp.Strategy)
		return "", nil
	}
}

// proxyHealthCheck is an active HTTP health check with HTTPProxy's defaults.
func proxyHealthCheck(hp *contourv1.HTTPHealthCheckPolicy, field string, c *proxyCheck) *HealthCheck {
	if hp == nil {
		return nil
	}
	hc := &HealthCheck{Path: hp.Path, Host: hp.Host}
	if hc.Host == "" {
		hc.Host = DefaultHealthCheckHost
	}
	if !strings.HasPrefix(hp.Path, "/") {
		c.fail(problemRoute, "HealthCheckInvalid", "%s.path %q must start with \"/\"", field, hp.Path)
	}
	proxyHealthTiming(hc, hp.IntervalSeconds, hp.TimeoutSeconds, hp.UnhealthyThresholdCount, hp.HealthyThresholdCount, field, c)
	for i, r := range hp.ExpectedStatuses {
		if r.Start < 100 || r.End > 600 || r.Start >= r.End {
			c.fail(problemRoute, "HealthCheckInvalid", "%s.expectedStatuses[%d] [%d, %d) must be a range of HTTP statuses within [100, 600) with start < end", field, i, r.Start, r.End)
			continue
		}
		hc.ExpectedStatuses = append(hc.ExpectedStatuses, StatusRange{Start: r.Start, End: r.End})
	}
	return hc
}

func proxyHealthTiming(hc *HealthCheck, interval, timeout, unhealthy, healthy int64, field string, c *proxyCheck) {
	hc.Interval, hc.Timeout = defaultProxyHealthInterval, defaultProxyHealthTimeout
	hc.UnhealthyThreshold, hc.HealthyThreshold = defaultProxyUnhealthyThresh, defaultProxyHealthyThreshold
	for _, v := range []struct {
		name  string
		value int64
		max   int64
		set   func(int64)
	}{
		{"intervalSeconds", interval, maxHealthCheckSeconds, func(v int64) { hc.Interval = time.Duration(v) * time.Second }},
		{"timeoutSeconds", timeout, maxHealthCheckSeconds, func(v int64) { hc.Timeout = time.Duration(v) * time.Second }},
		{"unhealthyThresholdCount", unhealthy, maxHealthCheckThresholdSize, func(v int64) { hc.UnhealthyThreshold = uint32(v) }},
		{"healthyThresholdCount", healthy, maxHealthCheckThresholdSize, func(v int64) { hc.HealthyThreshold = uint32(v) }},
	} {
		switch {
		case v.value < 0 || v.value > v.max:
			c.fail(problemRoute, "HealthCheckInvalid", "%s.%s %d must be 0-%d (0 means the default)", field, v.name, v.value, v.max)
		case v.value > 0:
			v.set(v.value)
		}
	}
}

// proxyTCPHealthCheck is a connect-only health check.
func proxyTCPHealthCheck(hp *contourv1.TCPHealthCheckPolicy, field string, c *proxyCheck) *HealthCheck {
	if hp == nil {
		return nil
	}
	hc := &HealthCheck{TCP: true}
	proxyHealthTiming(hc, hp.IntervalSeconds, hp.TimeoutSeconds, int64(hp.UnhealthyThresholdCount), int64(hp.HealthyThresholdCount), field, c)
	return hc
}

// envoyHeaderOperators are the Envoy header value operators Contour passes through to
// Envoy in a headers policy (its "dynamic header values"); %REQ(name)% is headerOperator's
// own. Every other "%" is sent literally.
var envoyHeaderOperators = []string{
	"DOWNSTREAM_REMOTE_ADDRESS", "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT",
	"DOWNSTREAM_LOCAL_ADDRESS", "DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT", "DOWNSTREAM_LOCAL_PORT",
	"DOWNSTREAM_LOCAL_URI_SAN", "DOWNSTREAM_PEER_URI_SAN", "DOWNSTREAM_LOCAL_SUBJECT",
	"DOWNSTREAM_PEER_SUBJECT", "DOWNSTREAM_PEER_ISSUER", "DOWNSTREAM_TLS_SESSION_ID",
	"DOWNSTREAM_TLS_CIPHER", "DOWNSTREAM_TLS_VERSION", "DOWNSTREAM_PEER_FINGERPRINT_256",
	"DOWNSTREAM_PEER_FINGERPRINT_1", "DOWNSTREAM_PEER_SERIAL", "DOWNSTREAM_PEER_CERT",
	"DOWNSTREAM_PEER_CERT_V_START", "DOWNSTREAM_PEER_CERT_V_END",
	"HOSTNAME", "PROTOCOL", "UPSTREAM_REMOTE_ADDRESS", "RESPONSE_FLAGS", "RESPONSE_CODE_DETAILS",
}

// headerOperator finds the operators of a header value: Envoy's (%REQ(name)%, with an
// alternative header and a maximum length as %REQ(name?other):N%, and the others by
// name) and Portico's own %CONTOUR_...% variables. A length has at most 19 digits:
// Envoy reads it as a 64-bit size and refuses the whole route configuration over one
// that does not fit; a longer one is text, as any other "%".
var headerOperator = regexp.MustCompile(`%(REQ\(:?[\w-]+(\?:?[\w-]+)?\)(:\d{1,19})?|` +
	strings.Join(envoyHeaderOperators, "|") + `|CONTOUR_NAMESPACE|CONTOUR_SERVICE_NAME|CONTOUR_SERVICE_PORT)%`)

// hostFromHeader finds the header a Host value takes the Host from: Contour's
// %REQ(name)%, wherever it is in the value.
var hostFromHeader = regexp.MustCompile(`%REQ\(([A-Za-z0-9-]+)\)%`)

// headerVars are the %CONTOUR_...% variables a headers policy fills in, by name; a
// variable not among them (a service's, on a route's policy) is sent literally.
type headerVars map[string]string

// serviceVars are the variables of a service's headers policy (svc empty: a route's).
func serviceVars(ns, svc string, port int) headerVars {
	vars := headerVars{"%CONTOUR_NAMESPACE%": ns}
	if svc != "" {
		vars["%CONTOUR_SERVICE_NAME%"], vars["%CONTOUR_SERVICE_PORT%"] = svc, strconv.Itoa(port)
	}
	return vars
}

// headerValue escapes every "%" of v that does not start a supported operator, so that
// what the user wrote is what the client or backend sees, and fills in the variables
// Portico knows.
func headerValue(v string, vars headerVars) string {
	var b strings.Builder
	last := 0
	for _, m := range headerOperator.FindAllStringIndex(v, -1) {
		b.WriteString(strings.ReplaceAll(v[last:m[0]], "%", "%%"))
		op := v[m[0]:m[1]]
		switch val, known := vars[op]; {
		case known:
			op = val
		case strings.HasPrefix(op, "%CONTOUR_"):
			op = "%" + op + "%"
		}
		b.WriteString(op)
		last = m[1]
	}
	b.WriteString(strings.ReplaceAll(v[last:], "%", "%%"))
	return b.String()
}

// hostRewrite is how a route rewrites the Host of the requests it forwards: to
// literal, or to the value of the request header header (a Host of %REQ(name)%).
// Empty: the Host is kept.
type hostRewrite struct {
	literal, header string
}

// proxyHeadersPolicy checks and converts a headers policy. Setting Host on a route's
// requests is a host rewrite, returned apart; on a service's requests it stays among the
// headers set (the translator makes it the service's own host rewrite, which the route's
// overrides); responses have no Host to set.
func proxyHeadersPolicy(hp *contourv1.HeadersPolicy, field string, request bool, ns, svc string, port int, routeLevel bool, c *proxyCheck) (*HeadersPolicy, hostRewrite) {
	var host hostRewrite
	if hp == nil {
		return nil, host
	}
	out := &HeadersPolicy{}
	seen := map[string]bool{}
	vars := serviceVars(ns, svc, port)
	for i, h := range hp.Set {
		at := fmt.Sprintf("%s.set[%d]", field, i)
		name := http.CanonicalHeaderKey(h.Name)
		if msg := headerNameProblem(h.Name, request, true); msg != "" {
			c.fail(problemRoute, "HeaderPolicyInvalid", "%s.name: %s", at, msg)
			continue
		}
		switch {
		case strings.ContainsAny(h.Value, "\r\n\x00"):
			c.fail(problemRoute, "HeaderPolicyInvalid", "%s.value may not contain CR, LF or NUL", at)
			continue
		case seen[name]:
			c.fail(problemRoute, "HeaderPolicyInvalid", "%s: header %q is set twice", at, h.Name)
			continue
		}
		seen[name] = true
		if name == "Host" {
			host = proxyHostRewrite(h.Value, at, routeLevel, c)
			if !routeLevel && host.literal != "" {
				out.Set = append(out.Set, HeaderValue{Name: name, Value: host.literal})
			}
			continue
		}
		if routeLevel && (strings.Contains(h.Value, "%CONTOUR_SERVICE_NAME%") || strings.Contains(h.Value, "%CONTOUR_SERVICE_PORT%")) {
			c.warn(problemRoute, "HeaderPolicyLiteral", "%s: %%CONTOUR_SERVICE_NAME%% and %%CONTOUR_SERVICE_PORT%% name a service, so a route's headers policy sends them as they are written; use them in a service's headers policy to get its name and port", at)
		}
		out.Set = append(out.Set, HeaderValue{Name: name, Value: headerValue(h.Value, vars)})
	}
	for i, name := range hp.Remove {
		if msg := headerNameProblem(name, request, false); msg != "" {
			c.fail(problemRoute, "HeaderPolicyInvalid", "%s.remove[%d]: %s", field, i, msg)
			continue
		}
		out.Remove = append(out.Remove, http.CanonicalHeaderKey(name))
	}
	if len(out.Set) == 0 && len(out.Remove) == 0 {
		return nil, host
	}
	return out, host
}

// proxyHostRewrite is what a Host value v of a headers policy rewrites the Host to, as
// Contour reads it: a value with %REQ(name)% takes the Host from that request header (a
// route's only: Envoy's weighted clusters cannot), anything else is the Host as written.
func proxyHostRewrite(v, at string, routeLevel bool, c *proxyCheck) hostRewrite {
	m := hostFromHeader.FindStringSubmatchIndex(v)
	switch {
	case m == nil:
		return hostRewrite{literal: v}
	case !routeLevel:
		c.warn(problemService, "HostRewriteIgnored", "%s: Host %q takes the Host from a request header, which only a route's requestHeadersPolicy can do: this service's requests keep their Host; move it to the route's requestHeadersPolicy", at, v)
		return hostRewrite{}
	case m[0] != 0 || m[1] != len(v):
		c.warn(problemRoute, "HostRewriteHeaderOnly", "%s: Host %q takes the Host from header %s alone and ignores the rest of the value; write %q", at, v, v[m[2]:m[3]], v[m[0]:m[1]])
	}
	return hostRewrite{header: http.CanonicalHeaderKey(v[m[2]:m[3]])}
}

func proxyRedirect(rp *contourv1.HTTPRequestRedirectPolicy, field string, c *proxyCheck) *Redirect {
	field += ".requestRedirectPolicy"
	r := &Redirect{StatusCode: http.StatusFound}
	if rp.Scheme != nil {
		if *rp.Scheme != "http" && *rp.Scheme != "https" {
			c.fail(problemRoute, "RedirectInvalid", "%s.scheme %q must be http or https", field, *rp.Scheme)
		}
		r.Scheme = *rp.Scheme
	}
	if rp.Hostname != nil {
		if msg := redirectHostname(*rp.Hostname); msg != "" {
			c.fail(problemRoute, "RedirectInvalid", "%s.hostname %q %s", field, *rp.Hostname, msg)
		}
		r.Hostname = *rp.Hostname
	}
	if rp.Port != nil {
		if *rp.Port < 1 || *rp.Port > 65535 {
			c.fail(problemRoute, "RedirectInvalid", "%s.port %d must be 1-65535", field, *rp.Port)
		} else {
			r.Port = uint32(*rp.Port)
		}
	}
	if rp.StatusCode != nil {
		if !slices.Contains([]int{301, 302, 303, 307, 308}, *rp.StatusCode) {
			c.fail(problemRoute, "RedirectInvalid", "%s.statusCode %d must be 301, 302, 303, 307 or 308", field, *rp.StatusCode)
		} else {
			r.StatusCode = uint32(*rp.StatusCode)
		}
	}
	if rp.Path != nil && rp.Prefix != nil {
		c.fail(problemRoute, "RedirectInvalid", "%s: path and prefix are exclusive", field)
	}
	for _, p := range []struct {
		name string
		v    *string
		into *string
	}{{"path", rp.Path, &r.Path}, {"prefix", rp.Prefix, &r.Prefix}} {
		if p.v != nil {
			if !strings.HasPrefix(*p.v, "/") {
				c.fail(problemRoute, "RedirectInvalid", "%s.%s %q must start with \"/\"", field, p.name, *p.v)
			}
			*p.into = *p.v
		}
	}
	return r
}

// redirectHostname says why h cannot be a redirect's host name, or "".
func redirectHostname(h string) string {
	if h == "" {
		return "is empty: name the host to redirect to, or leave hostname out to keep the request's"
	}
	if errs := isDNS1123Subdomain(strings.ToLower(h)); len(errs) > 0 {
		return "is not a host name: " + strings.Join(errs, "; ")
	}
	if !lowerDNSName(h) {
		return "must be written in lower case"
	}
	return ""
}

// validatePathRewrite checks a pathRewritePolicy: it replaces the route's prefix, so the
// route must match by prefix, and each prefix may be replaced once.
func validatePathRewrite(p *contourv1.PathRewritePolicy, conds conditions, field string, c *proxyCheck) {
	field += ".pathRewritePolicy"
	if conds.path.Kind == PathExact || conds.path.Kind == PathRegex {
		c.fail(problemRoute, "PathRewriteInvalid", "%s needs a prefix condition: it replaces the prefix the route matched", field)
	}
	seen := map[string]bool{}
	for i, rp := range p.ReplacePrefix {
		if seen[rp.Prefix] {
			c.fail(problemRoute, "PathRewriteInvalid", "%s.replacePrefix[%d]: prefix %q is replaced twice", field, i, rp.Prefix)
		}
		seen[rp.Prefix] = true
		if !strings.HasPrefix(rp.Replacement, "/") {
			c.fail(problemRoute, "PathRewriteInvalid", "%s.replacePrefix[%d].replacement %q must start with \"/\"", field, i, rp.Replacement)
		}
	}
}

// pickPrefixRewrite chooses the replacement for a route's merged prefix: the entry that
// names that prefix, else the entry without a prefix (any prefix).
func pickPrefixRewrite(p *contourv1.PathRewritePolicy, prefix string) string {
	fallback := ""
	for _, rp := range p.ReplacePrefix {
		switch rp.Prefix {
		case prefix:
			return rp.Replacement
		case "":
			fallback = rp.Replacement
		}
	}
	return fallback
}

// proxyServices resolves a route's (or a tcpproxy's) services in the object's own
// namespace. Weights are used as written when any is set (0 then means no traffic);
// otherwise traffic is split evenly. http says that the services receive HTTP requests,
// to which their headers policies apply.
func (b *builder) proxyServices(n *proxyNode, services []contourv1.Service, field string, pol clusterPolicy, http bool, c *proxyCheck) []*WeightedCluster {
	var total int64
	for _, s := range services {
		if !s.Mirror {
			total += s.Weight
		}
	}
	out := make([]*WeightedCluster, 0, len(services))
	for i := range services {
		s := &services[i]
		if s.Mirror {
			continue // a copy of the requests only (proxyMirrors)
		}
		at := lazyField{field, ".services", i}
		cluster := b.proxyServiceCluster(n, s, at, pol, c)
		if cluster == nil {
			continue
		}
		weight := uint32(1)
		if total > 0 {
			weight = uint32(min(s.Weight, 1<<24))
		}
		wc := &WeightedCluster{Cluster: cluster, Weight: weight}
		if http {
			wc.CookieRewrites = proxyCookieRewrites(s.CookieRewritePolicies)
		}
		if s.RequestHeadersPolicy != nil && http {
			wc.RequestHeaders, _ = proxyHeadersPolicy(s.RequestHeadersPolicy, at.String()+".requestHeadersPolicy", true, n.p.Namespace, s.Name, s.Port, false, c)
		}
		if s.ResponseHeadersPolicy != nil && http {
			wc.ResponseHeaders, _ = proxyHeadersPolicy(s.ResponseHeadersPolicy, at.String()+".responseHeadersPolicy", false, n.p.Namespace, s.Name, s.Port, false, c)
		}
		if http {
			b.serviceDefaultHeaders(wc, n.p.Namespace, s.Name, s.Port)
		}
		out = append(out, wc)
	}
	return out
}

// proxyServiceCluster is the cluster of one service, or nil when the service is
// invalid (its problem recorded). Its protocol upstream is the service's own, else the
// one its Service's annotation gives the port.
func (b *builder) proxyServiceCluster(n *proxyNode, s *contourv1.Service, at lazyField, pol clusterPolicy, c *proxyCheck) *Cluster {
	if s.Name == "" {
		c.fail(problemService, "NameMissing", "%s.name is required", at)
		return nil
	}
	if s.Port < 1 || s.Port > 65535 {
		c.fail(problemService, "PortInvalid", "%s.port %d must be 1-65535", at, s.Port)
		return nil
	}
	if s.Weight < 0 {
		c.fail(problemService, "WeightInvalid", "%s.weight %d must not be negative", at, s.Weight)
		return nil
	}
	p := pol
	if s.Protocol != nil || s.UpstreamValidation != nil {
		p.protocol, p.validation = b.proxyUpstreamTLS(n, s, at.String(), c)
	} else {
		// Contour's annotation holds for tcpproxy services too: it speaks TLS to a
		// port annotated tls or h2.
		p.protocol, _ = b.annotatedProtocol(n.p.Namespace, s.Name, s.Port)
	}
	if overTLS(p.protocol) {
		if msg := b.clientCertificateProblem(); msg != "" {
			c.fail(problemTLS, "SecretNotValid", "%s speaks %s to its backend: %s", at, p.protocol, msg)
			return nil
		}
	}
	p.healthPort = b.proxyHealthPort(n, s, at, pol, c)
	p.slowStart = proxySlowStart(s.SlowStartPolicy, pol.lb, at, c)
	be := networkingv1.IngressServiceBackend{Name: s.Name, Port: networkingv1.ServiceBackendPort{Number: int32(s.Port)}}
	cluster, warning, annotations := b.serviceCluster(n.p.Namespace, &be, p)
	if warning != "" {
		c.warn(problemService, "ServiceUnresolved", "%s: %s", at, warning)
	}
	if annotations != "" {
		c.warn(problemService, "AnnotationInvalid", "%s: %s", at, annotations)
	}
	return cluster
}

// proxyHealthPort is the Service port a service's health checks go to instead of
// its own (healthPort), or 0.
func (b *builder) proxyHealthPort(n *proxyNode, s *contourv1.Service, at lazyField, pol clusterPolicy, c *proxyCheck) int32 {
	switch {
	case s.HealthPort == 0 || s.HealthPort == s.Port:
		return 0
	case s.HealthPort < 0 || s.HealthPort > 65535:
		c.fail(problemService, "HealthPortInvalid", "%s.healthPort %d must be 1-65535", at, s.HealthPort)
		return 0
	case pol.hc == nil:
		c.warn(problemService, "HealthPortUnused", "%s.healthPort has no effect without a healthCheckPolicy: nothing checks the endpoints", at)
		return 0
	}
	if svc := b.store.Services[types.NamespacedName{Namespace: n.p.Namespace, Name: s.Name}]; svc != nil && svc.Spec.Type != corev1.ServiceTypeExternalName {
		if _, ok := servicePort(svc, networkingv1.ServiceBackendPort{Number: int32(s.HealthPort)}); !ok {
			c.warn(problemService, "HealthPortUnresolved", "%s.healthPort: Service %s/%s has no port %d: health checks go to port %d", at, n.p.Namespace, s.Name, s.HealthPort, s.Port)
			return 0
		}
	}
	return int32(s.HealthPort)
}

// proxyUpstreamTLS checks a service's protocol and certificate validation. The
// protocol is the service's own, else the one its Service's Contour annotation gives
// the port (annotatedProtocol).
func (b *builder) proxyUpstreamTLS(n *proxyNode, s *contourv1.Service, field string, c *proxyCheck) (string, *UpstreamValidation) {
	protocol, known := "", true
	if s.Protocol != nil {
		protocol = *s.Protocol
	} else {
		protocol, known = b.annotatedProtocol(n.p.Namespace, s.Name, s.Port)
	}
	if s.Protocol != nil && !validProxyProtocol(protocol) {
		c.fail(problemService, "ProtocolInvalid", "%s.protocol %q must be one of %s (or unset for HTTP/1.1)", field, protocol, strings.Join(proxyProtocols, ", "))
		return "", nil
	}
	uv := s.UpstreamValidation
	if uv == nil {
		return protocol, nil
	}
	tlsUp := overTLS(protocol)
	if !tlsUp && known {
		c.fail(problemService, "ValidationInvalid", "%s.validation needs protocol tls or h2: only a TLS connection has a certificate to verify; set %s.protocol, or annotate the Service %s%s: \"%d\"", field, field, upstreamProtocolAnnotation, "tls", s.Port)
		return protocol, nil
	}
	if problems := upstreamValidationProblems(uv); len(problems) > 0 {
		for _, msg := range problems {
			c.fail(problemService, "ValidationInvalid", "%s.validation.%s", field, msg)
		}
		return protocol, nil
	}
	names := slices.Clone(subjectNames(uv))
	key := types.NamespacedName{Namespace: n.p.Namespace, Name: uv.CACertificate}
	if ns, name, ok := strings.Cut(uv.CACertificate, "/"); ok {
		key = types.NamespacedName{Namespace: ns, Name: name}
		if ns != n.p.Namespace && !b.certificateDelegated(key, n.p.Namespace) {
			c.fail(problemService, "CASecretNotDelegated", "%s.validation.caSecret %q: namespace %s does not delegate Secret %s to namespace %s; add a TLSCertificateDelegation in %s listing it", field, uv.CACertificate, ns, name, n.p.Namespace, ns)
			return protocol, nil
		}
	}
	ca, msg := b.caSecret(key)
	if msg != "" {
		c.fail(problemService, "CASecretInvalid", "%s.validation.caSecret: %s", field, msg)
		return protocol, nil
	}
	if !tlsUp {
		// The Service is not known yet (the admission webhook, or a Service created
		// later): its annotation will tell, and the route answers 503 until then.
		return protocol, nil
	}
	return protocol, &UpstreamValidation{CAName: key.String(), CACert: ca, SubjectNames: names}
}

// caSecret returns the PEM certificates of a CA Secret ("ca.crt").
func (b *builder) caSecret(key types.NamespacedName) ([]byte, string) {
	s := b.store.Secrets[key]
	if s == nil {
		return nil, fmt.Sprintf("Secret %s not found", key)
	}
	ca := s.Data["ca.crt"]
	if len(ca) == 0 {
		return nil, fmt.Sprintf("Secret %s has no %q", key, "ca.crt")
	}
	if !validCABundle(ca) {
		return nil, fmt.Sprintf("Secret %s: %q holds no PEM certificate", key, "ca.crt")
	}
	return ca, ""
}
