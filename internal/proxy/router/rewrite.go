package router

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// pathRewrite is a RegexMatchAndSubstitute of a route (regex_rewrite) or a redirect:
// every match of re in the path, the query string left out, is replaced by the
// substitution. Envoy runs it with RE2's GlobalReplace, whose handling of empty matches
// Go's ReplaceAllString shares.
type pathRewrite struct {
	re *regexp.Regexp
	// template is the substitution in the syntax of Regexp.Expand.
	template string
}

// ConvertPathRewrite validates a regex_rewrite as Envoy does: the pattern must compile,
// and the substitution is an RE2 rewrite string, in which "\N" (a digit) is capture
// group N, which the pattern must have, and "\\" is a backslash; any other backslash is
// an error.
func ConvertPathRewrite(rs *matcherv3.RegexMatchAndSubstitute) (*pathRewrite, error) {
	pattern := rs.GetPattern().GetRegex()
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	template, err := expandTemplate(rs.GetSubstitution(), re.NumSubexp())
	if err != nil {
		return nil, fmt.Errorf("substitution %q: %w", rs.GetSubstitution(), err)
	}
	return &pathRewrite{re: re, template: template}, nil
}

// expandTemplate turns an RE2 rewrite string into Regexp.Expand's syntax.
func expandTemplate(subst string, groups int) (string, error) {
	if !strings.ContainsAny(subst, `\$`) {
		return subst, nil
	}
	var b strings.Builder
	for i := 0; i < len(subst); i++ {
		switch c := subst[i]; {
		case c == '$':
			b.WriteString("$$")
		case c != '\\':
			b.WriteByte(c)
		case i+1 == len(subst):
			return "", errors.New(`a "\" ends it: write "\\" for a backslash`)
		case subst[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case '0' <= subst[i+1] && subst[i+1] <= '9':
			n := int(subst[i+1] - '0')
			if n > groups {
				return "", fmt.Errorf(`"\%d" names a capture group the pattern does not have (it has %d)`, n, groups)
			}
			fmt.Fprintf(&b, "${%d}", n)
			i++
		default:
			return "", fmt.Errorf(`"\%c" is not a capture group: write "\\" for a backslash`, subst[i+1])
		}
	}
	return b.String(), nil
}

// Apply rewrites path.
func (pr *pathRewrite) Apply(path string) string {
	return pr.re.ReplaceAllString(path, pr.template)
}
