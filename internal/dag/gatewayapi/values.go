package gatewayapi

import (
	"strings"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The checks of values that the API server's schema makes for a cluster's objects,
// made again here: `portico run` reads manifests no API server has checked, and a
// value the data planes refuse would otherwise fail the whole configuration instead of
// the one object.

// hostnameProblem says why h is not a hostname a listener or route may have ("" if
// it is one): a DNS subdomain in lower case, or one preceded by "*.".
func hostnameProblem(h string) string {
	name := strings.TrimPrefix(h, "*.")
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return strings.Join(msgs, "; ")
	}
	return ""
}

func validHeaderName(n string) bool { return httpguts.ValidHeaderFieldName(n) }

// validValue reports whether v may be sent in a header (paths and hosts of redirects
// and rewrites included): no control characters but tab.
func validValue(v string) bool { return httpguts.ValidHeaderFieldValue(v) }

// validPath reports whether p is an absolute path the data planes accept.
func validPath(p string) bool { return strings.HasPrefix(p, "/") && validValue(p) }
