package dag

import (
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
	if p.Global != nil {
		c.fail(problemUnsupported, "SecurityFeatureNotImplemented", "%s.global is not implemented by Portico yet; the object is not served rather than served without the limit it asks for: remove the field, or use %s.local", field, field)
	}
	local := proxyLocalRateLimit(p.Local, field+".local", c)
	if local == nil {
		return nil
	}
	return &RateLimitPolicy{Local: local}
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
		if strings.ContainsAny(h.Value, "\r\n\x00") {
			c.fail(problemSpec, "RateLimitPolicyInvalid", "%s[%d].value may not contain CR, LF or NUL", field, i)
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
