package dag

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// problemCORS is the status type of a bad corsPolicy.
const problemCORS = "CORSError"

// CORSPolicy is how a virtual host (HTTPProxy) or route (Gateway API) answers
// cross-origin requests: the proxy answers preflights itself and adds the CORS
// headers to the responses of allowed origins.
type CORSPolicy struct {
	// AllowOrigins are the origins allowed; one with Any allows every origin.
	AllowOrigins []CORSOrigin
	// AllowMethods, AllowHeaders and ExposeHeaders are the lists the headers of the
	// same names carry; "*" alone in AllowMethods or AllowHeaders echoes what the
	// preflight asks for.
	AllowMethods, AllowHeaders, ExposeHeaders []string
	AllowCredentials                          bool
	// MaxAge is access-control-max-age in seconds; "" leaves the header out.
	MaxAge string
	// AllowPrivateNetwork answers private network access preflights.
	AllowPrivateNetwork bool
	// AnswerRefusedPreflights answers the preflights of origins not allowed too,
	// without allowing them (Gateway API), instead of forwarding them upstream
	// (Envoy's default, HTTPProxy's).
	AnswerRefusedPreflights bool
}

// CORSOrigin is one allowed origin: any, exactly one, or those a regular expression
// matches whole (RE2 syntax).
type CORSOrigin struct {
	Any   bool
	Exact string
	Regex string
}

// ParseCORSOrigin reads an HTTPProxy allowOrigin: "*", an origin
// ("scheme://host[:port]") matched exactly, or else a regular expression the whole
// Origin header must match.
func ParseCORSOrigin(s string) (CORSOrigin, error) {
	switch {
	case s == "*":
		return CORSOrigin{Any: true}, nil
	case strings.TrimSpace(s) == "":
		return CORSOrigin{}, errors.New("empty")
	}
	if isOrigin(s) {
		return CORSOrigin{Exact: s}, nil
	}
	if _, err := regexp.Compile(s); err != nil {
		return CORSOrigin{}, err
	}
	return CORSOrigin{Regex: s}, nil
}

// isOrigin reports whether s is a serialized origin: a scheme, "://", a host (a DNS
// name or an IP address, IPv6 in brackets) and an optional port, and nothing else.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil {
		return false
	}
	if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#") {
		return false
	}
	host, port := u.Hostname(), u.Port()
	if _, err := strconv.ParseUint(port, 10, 16); port != "" && err != nil {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host != "" && strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") == ""
}

// GatewayCORSOrigin reads a Gateway API CORS origin: "*" is any origin; a "*" in
// the host matches any characters, dots included, from its place leftwards.
func GatewayCORSOrigin(s string) CORSOrigin {
	if s == "*" {
		return CORSOrigin{Any: true}
	}
	if !strings.Contains(s, "*") {
		return CORSOrigin{Exact: s}
	}
	parts := strings.Split(s, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return CORSOrigin{Regex: strings.Join(parts, ".*")}
}

// proxyCORS checks and translates spec.virtualhost.corsPolicy; nil when unset or
// invalid.
func proxyCORS(p *contourv1.CORSPolicy, c *proxyCheck) *CORSPolicy {
	if p == nil {
		return nil
	}
	const field = "spec.virtualhost.corsPolicy"
	out := &CORSPolicy{
		AllowCredentials:    p.AllowCredentials,
		AllowPrivateNetwork: p.AllowPrivateNetwork,
		AllowMethods:        corsValues(p.AllowMethods),
		AllowHeaders:        corsValues(p.AllowHeaders),
		ExposeHeaders:       corsValues(p.ExposeHeaders),
	}
	ok := true
	if len(p.AllowOrigin) == 0 {
		ok = false
		c.fail(problemCORS, "AllowOriginMissing", "%s.allowOrigin is required: list the origins allowed, such as https://app.example.com, or \"*\" for any", field)
	}
	for i, s := range p.AllowOrigin {
		o, err := ParseCORSOrigin(s)
		if err != nil {
			ok = false
			c.fail(problemCORS, "AllowOriginInvalid", "%s.allowOrigin[%d] %q is neither \"*\", an origin (scheme://host[:port]) nor a regular expression (%v): a wildcard host is written as a regular expression, such as https://.*\\.example\\.com", field, i, s, err)
			continue
		}
		out.AllowOrigins = append(out.AllowOrigins, o)
	}
	if len(p.AllowMethods) == 0 {
		ok = false
		c.fail(problemCORS, "AllowMethodsMissing", "%s.allowMethods is required: list the methods cross-origin requests may use, such as GET and POST", field)
	}
	for _, list := range []struct {
		name   string
		values []contourv1.CORSHeaderValue
	}{{"allowMethods", p.AllowMethods}, {"allowHeaders", p.AllowHeaders}, {"exposeHeaders", p.ExposeHeaders}} {
		if list.values != nil && len(list.values) == 0 && list.name != "allowMethods" {
			ok = false
			c.fail(problemCORS, "HeaderValueInvalid", "%s.%s is empty: list at least one name, or leave it out", field, list.name)
		}
		for i, v := range list.values {
			if !validHeaderName(string(v)) { // an HTTP token, as methods are too
				ok = false
				c.fail(problemCORS, "HeaderValueInvalid", "%s.%s[%d] %q is not a method or header name (letters, digits and !#$%%&'*+.^_`|~-)", field, list.name, i, v)
			}
		}
	}
	if p.MaxAge != "" {
		secs, err := corsMaxAge(p.MaxAge)
		if err != nil {
			ok = false
			c.fail(problemCORS, "MaxAgeInvalid", "%s.maxAge %q: %v; write a duration such as 10m or 1h, or 0 to let browsers cache no preflight answer", field, p.MaxAge, err)
		}
		out.MaxAge = secs
	}
	if !ok {
		return nil
	}
	return out
}

// corsMaxAge is a maxAge duration in whole seconds.
func corsMaxAge(s string) (string, error) {
	if s == "0" {
		return "0", nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return "", fmt.Errorf("not a duration")
	}
	if d < 0 {
		return "", fmt.Errorf("negative")
	}
	return strconv.FormatInt(int64(d/time.Second), 10), nil
}

func corsValues(vs []contourv1.CORSHeaderValue) []string {
	if len(vs) == 0 {
		return nil
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
