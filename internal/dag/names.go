package dag

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The k8s name validators match a regexp on every call, which cost about 8% of a cold
// build at 10,000 Ingresses, where nearly every name is valid. These accept by hand
// exactly what the regexps accept (names_test.go checks them against each other), and
// pass a name they reject to the k8s validator for its messages.

func isDNS1123Subdomain(s string) []string {
	if len(s) <= validation.DNS1123SubdomainMaxLength && dns1123Labels(s) {
		return nil
	}
	return validation.IsDNS1123Subdomain(s)
}

func isDNS1123Label(s string) []string {
	if len(s) <= validation.DNS1123LabelMaxLength && dns1123Label(s) {
		return nil
	}
	return validation.IsDNS1123Label(s)
}

func isDNS1035Label(s string) []string {
	if len(s) <= validation.DNS1035LabelMaxLength && len(s) > 0 && isLower(s[0]) && dns1123Label(s) {
		return nil
	}
	return validation.IsDNS1035Label(s)
}

func isWildcardDNS1123Subdomain(s string) []string {
	if len(s) <= validation.DNS1123SubdomainMaxLength && strings.HasPrefix(s, "*.") && dns1123Labels(s[2:]) {
		return nil
	}
	return validation.IsWildcardDNS1123Subdomain(s)
}

func isValidPortName(s string) []string {
	if portName(s) {
		return nil
	}
	return validation.IsValidPortName(s)
}

// isIP reports whether s is an IP address as validation.IsValidIP accepts it. Every form of IP address has a ':' or only digits and dots: other strings
// are not parsed.
func isIP(s string) bool {
	if !strings.Contains(s, ":") && strings.ContainsFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }) {
		return false
	}
	return validation.IsValidIP(nil, s) == nil
}

// dns1123Labels matches [a-z0-9]([-a-z0-9]*[a-z0-9])? labels separated by dots.
func dns1123Labels(s string) bool {
	for {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return dns1123Label(s)
		}
		if !dns1123Label(s[:i]) {
			return false
		}
		s = s[i+1:]
	}
}

// dns1123Label matches [a-z0-9]([-a-z0-9]*[a-z0-9])?, whatever its length.
func dns1123Label(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLower(c) && !isDigit(c) && c != '-' {
			return false
		}
	}
	return true
}

// portName is IsValidPortName's rule: 1 to 15 of [-a-z0-9], at least one letter, no
// "--", no hyphen first or last.
func portName(s string) bool {
	if s == "" || len(s) > 15 || s[0] == '-' || s[len(s)-1] == '-' || strings.Contains(s, "--") {
		return false
	}
	letter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isLower(c):
			letter = true
		case isDigit(c) || c == '-':
		default:
			return false
		}
	}
	return letter
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
