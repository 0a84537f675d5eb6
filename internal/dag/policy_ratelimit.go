package dag

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// RateLimitPolicy limits the request rate of a virtual host or a route. A route's
// policy replaces its virtual host's.
type RateLimitPolicy struct {
	// Local is nil when each data plane instance does not limit on its own.
	Local *LocalRateLimit
	// Global is nil when the rate limit service is not asked.
	Global *GlobalRateLimit
}

// GlobalRateLimit is what the data planes send the global rate limit service about
// each request, which decides whether it is over a limit.
type GlobalRateLimit struct {
	// Disabled, on a route, drops its virtual host's descriptors for it.
	Disabled bool
	// Descriptors each become one descriptor of a request, unless one of its entries
	// has no value for the request (a request header that is absent, headers that do
	// not match as asked).
	Descriptors []RateLimitDescriptor
}

// RateLimitDescriptor is a list of entries, in order.
type RateLimitDescriptor struct {
	Entries []RateLimitEntry
}

// RateLimitEntry is one key and value of a descriptor; exactly one field is set.
type RateLimitEntry struct {
	// GenericKey is a fixed key and value.
	GenericKey *GenericKeyEntry
	// RequestHeader is the value of a request header under a key.
	RequestHeader *RequestHeaderEntry
	// HeaderValueMatch is a fixed value under "header_match", present when Headers all
	// match (or, with ExpectMatch false, when they do not all match).
	HeaderValueMatch *HeaderValueMatchEntry
	// RemoteAddress is the client's address under "remote_address".
	RemoteAddress bool
}

// GenericKeyEntry is a fixed entry; Key defaults to "generic_key".
type GenericKeyEntry struct{ Key, Value string }

// RequestHeaderEntry takes Header's value as Key's.
type RequestHeaderEntry struct{ Header, Key string }

// HeaderValueMatchEntry is a fixed value present when headers match.
type HeaderValueMatchEntry struct {
	Headers     []HeaderMatch
	ExpectMatch bool
	Value       string
}

// LocalRateLimit is a token bucket each data plane instance keeps on its own: it
// starts full with MaxTokens, gains TokensPerFill every FillInterval (never above
// MaxTokens), and each request takes a token. A request that finds it empty is
// answered Status, with ResponseHeaders added.
type LocalRateLimit struct {
	MaxTokens     uint32
	TokensPerFill uint32
	FillInterval  time.Duration
	Status        uint32
	// ResponseHeaders are added to the answers to limited requests; their values are
	// in Envoy's header format, literal ("%" doubled).
	ResponseHeaders []HeaderValue
}

// DefaultRateLimitStatus answers requests over a local rate limit unless the policy
// names another status.
const DefaultRateLimitStatus = http.StatusTooManyRequests

var rateLimitUnits = map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour}

// proxyRateLimit checks and translates an HTTPProxy rateLimitPolicy at field; nil when
// it limits nothing or has problems (reported through c).
func proxyRateLimit(p *contourv1.RateLimitPolicy, field string, c *proxyCheck) *RateLimitPolicy {
	if p == nil {
		return nil
	}
	if p.Local == nil && p.Global == nil {
		c.fail(problemSpec, "RateLimitPolicyInvalid", "%s needs local or global: an empty policy limits nothing; remove it or say what to limit", field)
		return nil
	}
	failures := len(c.errors)
	out := &RateLimitPolicy{
		Local:  proxyLocalRateLimit(p.Local, field+".local", c),
		Global: proxyGlobalRateLimit(p.Global, field+".global", c),
	}
	if len(c.errors) > failures || (out.Local == nil && out.Global == nil) {
		return nil
	}
	return out
}

func proxyGlobalRateLimit(g *contourv1.GlobalRateLimitPolicy, field string, c *proxyCheck) *GlobalRateLimit {
	if g == nil {
		return nil
	}
	if !g.Disabled && len(g.Descriptors) == 0 {
		c.fail(problemSpec, "RateLimitPolicyInvalid", "%s needs descriptors (or disabled: true): without them nothing is sent to the rate limit service", field)
		return nil
	}
	out := &GlobalRateLimit{Disabled: g.Disabled}
	for i, d := range g.Descriptors {
		at := fmt.Sprintf("%s.descriptors[%d]", field, i)
		if len(d.Entries) == 0 {
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.entries: a descriptor needs at least one entry", at)
			continue
		}
		var desc RateLimitDescriptor
		for j := range d.Entries {
			if e, ok := proxyRateLimitEntry(&d.Entries[j], fmt.Sprintf("%s.entries[%d]", at, j), c); ok {
				desc.Entries = append(desc.Entries, e)
			}
		}
		out.Descriptors = append(out.Descriptors, desc)
	}
	return out
}

// proxyRateLimitEntry checks and translates one descriptor entry.
func proxyRateLimitEntry(e *contourv1.RateLimitDescriptorEntry, field string, c *proxyCheck) (RateLimitEntry, bool) {
	set := 0
	for _, isSet := range []bool{e.GenericKey != nil, e.RequestHeader != nil, e.RequestHeaderValueMatch != nil, e.RemoteAddress != nil} {
		if isSet {
			set++
		}
	}
	if set != 1 {
		c.fail(problemSpec, "RateLimitPolicyInvalid", "%s must set exactly one of genericKey, requestHeader, requestHeaderValueMatch, remoteAddress (it sets %d)", field, set)
		return RateLimitEntry{}, false
	}
	switch {
	case e.GenericKey != nil:
		if e.GenericKey.Value == "" {
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.genericKey.value is required", field)
			return RateLimitEntry{}, false
		}
		key := e.GenericKey.Key
		if key == "" {
			key = "generic_key"
		}
		return RateLimitEntry{GenericKey: &GenericKeyEntry{Key: key, Value: e.GenericKey.Value}}, true
	case e.RequestHeader != nil:
		h := e.RequestHeader
		switch {
		case !validHeaderName(h.HeaderName):
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.requestHeader.headerName %q is not a valid header name", field, h.HeaderName)
		case h.DescriptorKey == "":
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.requestHeader.descriptorKey is required: it is the key the header's value is sent under", field)
		default:
			return RateLimitEntry{RequestHeader: &RequestHeaderEntry{Header: strings.ToLower(h.HeaderName), Key: h.DescriptorKey}}, true
		}
		return RateLimitEntry{}, false
	case e.RequestHeaderValueMatch != nil:
		m := e.RequestHeaderValueMatch
		ok := true
		if m.Value == "" {
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.requestHeaderValueMatch.value is required", field)
			ok = false
		}
		if len(m.Headers) == 0 {
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.requestHeaderValueMatch.headers needs at least one header condition", field)
			ok = false
		}
		out := &HeaderValueMatchEntry{ExpectMatch: m.ExpectMatch == nil || *m.ExpectMatch, Value: m.Value}
		for i := range m.Headers {
			hm, msg := parseHeaderCondition(&m.Headers[i])
			if msg != "" {
				c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.requestHeaderValueMatch.headers[%d]: %s", field, i, msg)
				ok = false
				continue
			}
			out.Headers = append(out.Headers, hm)
		}
		return RateLimitEntry{HeaderValueMatch: out}, ok
	}
	return RateLimitEntry{RemoteAddress: true}, true
}

func proxyLocalRateLimit(l *contourv1.LocalRateLimitPolicy, field string, c *proxyCheck) *LocalRateLimit {
	if l == nil {
		return nil
	}
	failures := len(c.errors)
	unit, ok := rateLimitUnits[l.Unit]
	if !ok {
		c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.unit %q must be second, minute or hour", field, l.Unit)
	}
	if l.Requests == 0 {
		c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.requests must be at least 1: it is how many requests each %s lets through", field, orDefault(l.Unit, "unit"))
	}
	if uint64(l.Requests)+uint64(l.Burst) > 1<<32-1 {
		c.fail(problemSpec, "RateLimitPolicyInvalid", "%s: requests plus burst is %d, above %d", field, uint64(l.Requests)+uint64(l.Burst), uint32(1<<32-1))
	}
	status := l.ResponseStatusCode
	if status == 0 {
		status = DefaultRateLimitStatus
	}
	if _, known := typev3.StatusCode_name[int32(status)]; status < 400 || status > 599 || !known {
		c.fail(problemSpec, "RateLimitPolicyInvalid", "%s.responseStatusCode %d is not a 4xx or 5xx status the data planes can answer (Envoy's list of HTTP statuses); 429 is the usual one", field, l.ResponseStatusCode)
	}
	headers := rateLimitHeaders(l.ResponseHeadersToAdd, field+".responseHeadersToAdd", c)
	if len(c.errors) > failures {
		return nil
	}
	return &LocalRateLimit{
		MaxTokens:       l.Requests + l.Burst,
		TokensPerFill:   l.Requests,
		FillInterval:    unit,
		Status:          status,
		ResponseHeaders: headers,
	}
}

// rateLimitHeaders checks the headers added to a limited request's answer; their
// values are literal.
func rateLimitHeaders(in []contourv1.HeaderValue, field string, c *proxyCheck) []HeaderValue {
	var out []HeaderValue
	for i, h := range in {
		if msg := headerNameProblem(h.Name, false, true); msg != "" {
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s[%d].name: %s", field, i, msg)
			continue
		}
		if h.Value == "" || strings.ContainsAny(h.Value, "\r\n\x00") {
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s[%d].value must be non-empty, without CR, LF or NUL", field, i)
			continue
		}
		out = append(out, HeaderValue{Name: http.CanonicalHeaderKey(h.Name), Value: strings.ReplaceAll(h.Value, "%", "%%")})
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ParseDefaultGlobalRateLimit checks and translates the controller's default global
// rate limit policy (Contour's defaultGlobalRateLimitPolicy), for Options: the error
// lists every problem.
func ParseDefaultGlobalRateLimit(p *contourv1.GlobalRateLimitPolicy) (*GlobalRateLimit, error) {
	var c proxyCheck
	g := proxyGlobalRateLimit(p, "default global rate limit policy", &c)
	if msgs := problemMessages(c.errors); len(msgs) > 0 {
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	return g, nil
}

// withDefaultGlobal is a root's virtual host policy p with the controller's default
// global policy when p has no global policy of its own (a global policy that is only
// disabled: true opts the host out).
func withDefaultGlobal(p *RateLimitPolicy, def *GlobalRateLimit) *RateLimitPolicy {
	if def == nil || (p != nil && p.Global != nil) {
		return p
	}
	out := &RateLimitPolicy{Global: def}
	if p != nil {
		out.Local = p.Local
	}
	return out
}

// warnGlobalUnenforced warns, when Portico runs without a rate limit service, that p's
// global policies with descriptors are checked but enforced by nothing.
func warnGlobalUnenforced(p *contourv1.HTTPProxy, c *proxyCheck) {
	sends := func(rl *contourv1.RateLimitPolicy) bool {
		return rl != nil && rl.Global != nil && len(rl.Global.Descriptors) > 0
	}
	var fields []string
	if vh := p.Spec.VirtualHost; vh != nil && sends(vh.RateLimitPolicy) {
		fields = append(fields, "spec.virtualhost.rateLimitPolicy.global")
	}
	for i := range p.Spec.Routes {
		if sends(p.Spec.Routes[i].RateLimitPolicy) {
			fields = append(fields, indexedField("spec.routes", i)+".rateLimitPolicy.global")
		}
	}
	for _, f := range fields {
		c.warn(problemUnsupported, "RateLimitServiceMissing", "%s is not enforced: Portico runs without a rate limit service (--rate-limit-service); requests are not limited", f)
	}
}
