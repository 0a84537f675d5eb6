package dag

import (
	"fmt"

	contourv1 "github.com/portico-dev/portico/apis/projectcontour/v1"
)

// The limits of an UpstreamValidation, as the HTTPProxy CRD's schema sets them: the
// API server refuses more, so `portico run`, `portico check` and the webhook do too.
const (
	maxCASecretRef  = 317 // a namespace (63), "/" and a Secret name (253)
	maxSubjectName  = 250
	maxSubjectNames = 8
)

// upstreamValidationProblems says what is wrong with a validation block (a service's,
// a JWKS server's or an ExtensionService's) on its own, each message starting with the
// field it is about, relative to the block. The CA Secret itself is looked up later.
func upstreamValidationProblems(v *contourv1.UpstreamValidation) []string {
	var out []string
	switch {
	case v.CACertificate == "":
		out = append(out, "caSecret is required: the Secret whose ca.crt the backend's certificate must chain to")
	case len(v.CACertificate) > maxCASecretRef:
		out = append(out, fmt.Sprintf("caSecret is %d characters long, over the limit of %d: name a Secret (or namespace/Secret)", len(v.CACertificate), maxCASecretRef))
	}
	switch {
	case v.SubjectName == "":
		out = append(out, "subjectName is required: the name the backend's certificate must carry (subjectNames may list more, starting with it)")
	case len(v.SubjectName) > maxSubjectName:
		out = append(out, fmt.Sprintf("subjectName is %d characters long, over the limit of %d", len(v.SubjectName), maxSubjectName))
	}
	switch n := len(v.SubjectNames); {
	case v.SubjectNames == nil:
	case n == 0:
		out = append(out, "subjectNames is empty: list at least one name, starting with subjectName, or leave it out")
	case n > maxSubjectNames:
		out = append(out, fmt.Sprintf("subjectNames has %d names, over the limit of %d", n, maxSubjectNames))
	}
	if len(v.SubjectNames) > 0 && v.SubjectName != "" && v.SubjectNames[0] != v.SubjectName {
		out = append(out, fmt.Sprintf("subjectNames[0] %q must equal subjectName %q: list subjectName first", v.SubjectNames[0], v.SubjectName))
	}
	for i, name := range v.SubjectNames {
		if len(name) > maxSubjectName {
			out = append(out, fmt.Sprintf("subjectNames[%d] is %d characters long, over the limit of %d", i, len(name), maxSubjectName))
		}
	}
	return out
}

// subjectNames is the names a valid block's certificate may carry, subjectName first.
func subjectNames(v *contourv1.UpstreamValidation) []string {
	if len(v.SubjectNames) > 0 {
		return v.SubjectNames
	}
	return []string{v.SubjectName}
}
