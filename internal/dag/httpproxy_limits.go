package dag

import (
	"strings"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// lowerDNSName reports whether s is dot-separated labels of lower-case letters, digits
// and inner '-', the form the HTTPProxy CRD's schema asks of host and domain names.
func lowerDNSName(s string) bool {
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if b := label[i]; !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-') {
				return false
			}
		}
	}
	return true
}

// validateHeaderValuesSet refuses an empty value in a headers policy's set list, as the
// HTTPProxy CRD's schema does: a header is removed with remove, not set to nothing.
// field.policy names it (two arguments: most routes pass, and need no name built).
func validateHeaderValuesSet(hp *contourv1.HeadersPolicy, field, policy string, c *proxyCheck) {
	if hp == nil {
		return
	}
	for i, h := range hp.Set {
		if h.Value == "" {
			c.fail(problemRoute, "HeaderValueEmpty", "%s.%s.set[%d].value is empty: give %s a value, or list it under remove to take it out", field, policy, i, h.Name)
		}
	}
}
