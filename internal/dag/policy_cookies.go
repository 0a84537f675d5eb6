package dag

import (
	"strings"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// CookieRewrite rewrites attributes of a cookie a backend sets (Set-Cookie): an empty
// Path, Domain or SameSite, or a nil Secure, leaves the attribute as it was.
type CookieRewrite struct {
	Name, Path, Domain string
	Secure             *bool
	SameSite           string
}

// maxCookieField is the longest cookie name or attribute value the HTTPProxy CRD's
// schema accepts.
const maxCookieField = 4096

// validateCookieRewrites checks a cookieRewritePolicies list (a route's or a
// service's): the data planes write these values into Set-Cookie headers.
func validateCookieRewrites(ps []contourv1.CookieRewritePolicy, field string, c *proxyCheck) {
	seen := map[string]bool{}
	for i := range ps {
		p := &ps[i]
		at := indexedField(field+".cookieRewritePolicies", i)
		switch {
		case len(p.Name) > maxCookieField:
			c.fail(problemRoute, "CookieRewriteInvalid", "%s.name is %d characters long, over the limit of %d", at, len(p.Name), maxCookieField)
		case p.Name == "" || strings.ContainsFunc(p.Name, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune(`()<>@,;:\"/[]?={}`, r) }):
			c.fail(problemRoute, "CookieRewriteInvalid", "%s.name %q must be a cookie name (a token: no spaces, separators or control characters)", at, p.Name)
		case seen[p.Name]:
			c.fail(problemRoute, "CookieRewriteInvalid", "%s.name %q is rewritten twice in this list; merge the two entries", at, p.Name)
		}
		seen[p.Name] = true
		for _, v := range []struct {
			name  string
			value *string
		}{{"pathRewrite.value", cookieValue(p.PathRewrite)}, {"domainRewrite.value", domainValue(p.DomainRewrite)}} {
			switch {
			case v.value == nil:
			case len(*v.value) > maxCookieField:
				c.fail(problemRoute, "CookieRewriteInvalid", "%s.%s is %d characters long, over the limit of %d", at, v.name, len(*v.value), maxCookieField)
			case *v.value == "" || strings.ContainsFunc(*v.value, func(r rune) bool { return r == ';' || r < ' ' || r == 0x7f }):
				c.fail(problemRoute, "CookieRewriteInvalid", "%s.%s %q must be non-empty, without ';' or control characters", at, v.name, *v.value)
			}
		}
		if d := p.DomainRewrite; d != nil && d.Value != "" && len(d.Value) <= maxCookieField && !lowerDNSName(d.Value) {
			c.fail(problemRoute, "CookieRewriteInvalid", "%s.domainRewrite.value %q must be a domain name in lower case (letters, digits, '-' and '.', such as example.com)", at, d.Value)
		}
		if s := p.SameSite; s != nil && *s != "Strict" && *s != "Lax" && *s != "None" {
			c.fail(problemRoute, "CookieRewriteInvalid", "%s.sameSite %q must be Strict, Lax or None", at, *s)
		}
		if p.PathRewrite == nil && p.DomainRewrite == nil && p.Secure == nil && p.SameSite == nil {
			c.warn(problemRoute, "CookieRewriteEmpty", "%s rewrites nothing of cookie %q: set pathRewrite, domainRewrite, secure or sameSite", at, p.Name)
		}
	}
}

func cookieValue(p *contourv1.CookiePathRewrite) *string {
	if p == nil {
		return nil
	}
	return &p.Value
}

func domainValue(p *contourv1.CookieDomainRewrite) *string {
	if p == nil {
		return nil
	}
	return &p.Value
}

// proxyCookieRewrites converts a cookieRewritePolicies list, assumed valid.
func proxyCookieRewrites(ps []contourv1.CookieRewritePolicy) []CookieRewrite {
	if len(ps) == 0 {
		return nil
	}
	out := make([]CookieRewrite, 0, len(ps))
	for _, p := range ps {
		cr := CookieRewrite{Name: p.Name, Secure: p.Secure}
		if v := cookieValue(p.PathRewrite); v != nil {
			cr.Path = *v
		}
		if v := domainValue(p.DomainRewrite); v != nil {
			cr.Domain = *v
		}
		if p.SameSite != nil {
			cr.SameSite = *p.SameSite
		}
		out = append(out, cr)
	}
	return out
}
