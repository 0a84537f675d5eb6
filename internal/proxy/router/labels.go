package router

import (
	"strconv"
	"strings"
)

// routeLabel is a route's route label: the object that declared it, which
// Portico's route names start with (<kind>/<namespace>/<name>, then ':' and
// the path condition); a name without ':' whole; "#<index>" (its position in
// the virtual host) when it has none.
func routeLabel(name string, index int) string {
	if name == "" {
		return "#" + strconv.Itoa(index)
	}
	if object, _, ok := strings.Cut(name, ":"); ok && object != "" {
		return object
	}
	return name
}

// pathLabel is a route's path label: the value of its path condition, the
// regular expression for safe_regex.
func pathLabel(m *routeMatch) string {
	if m.kind == pathRegex {
		return m.regex
	}
	return m.value
}
