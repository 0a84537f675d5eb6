package dag

import (
	"fmt"
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

// conditionConflicts finds, in one list of conditions, the header and query conditions
// Contour refuses together: two exact matches of one header or query parameter (a
// request carries one value), present with notpresent, exact with notexact or contains
// with notcontains of the same value on one header (no request matches both). It
// returns the reason and message of the first pair, or "" when there is none. Lists are
// short: a pairwise scan allocates nothing.
func conditionConflicts(field string, conds []contourv1.MatchCondition) (reason, msg string) {
	for i := range conds {
		for j := range i {
			if m := headerConflict(conds[j].Header, conds[i].Header); m != "" {
				return "HeaderMatchConditionsNotValid", fmt.Sprintf("%s[%d] and [%d]: %s", field, j, i, m)
			}
			if a, b := conds[j].QueryParameter, conds[i].QueryParameter; a != nil && b != nil && a.Exact != "" && b.Exact != "" && strings.EqualFold(a.Name, b.Name) {
				return "QueryParameterMatchConditionsNotValid", fmt.Sprintf("%s[%d] and [%d]: query parameter %q has two exact conditions; keep one (a regex can allow several values)", field, j, i, b.Name)
			}
		}
	}
	return "", ""
}

// headerConflict says why two header conditions cannot be on one route, or "". As in
// Contour, only conditions without ignoreCase or treatMissingAsEmpty contradict.
func headerConflict(a, b *contourv1.HeaderMatchCondition) string {
	if a == nil || b == nil || !strings.EqualFold(a.Name, b.Name) {
		return ""
	}
	if a.Exact != "" && b.Exact != "" {
		return fmt.Sprintf("header %q has two exact conditions; keep one (a regex can allow several values)", b.Name)
	}
	if a.IgnoreCase || b.IgnoreCase || a.TreatMissingAsEmpty || b.TreatMissingAsEmpty {
		return ""
	}
	opposite := func(x, notX string) bool { return x != "" && x == notX }
	switch {
	case a.Present && b.NotPresent, a.NotPresent && b.Present:
		return fmt.Sprintf("present and notpresent on header %q contradict each other: no request matches; remove one", b.Name)
	case opposite(a.Exact, b.NotExact), opposite(b.Exact, a.NotExact):
		return fmt.Sprintf("exact and notexact of the same value on header %q contradict each other: no request matches; remove one", b.Name)
	case opposite(a.Contains, b.NotContains), opposite(b.Contains, a.NotContains):
		return fmt.Sprintf("contains and notcontains of the same value on header %q contradict each other: no request matches; remove one", b.Name)
	}
	return ""
}
