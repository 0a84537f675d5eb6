package gatewayapi

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/portico-dev/portico/internal/dag"
)

// routeEntry is one match of one rule of a route, as a graph route, with what the
// precedence rules compare.
type routeEntry struct {
	route *dag.Route
	// pathLen is the length of the path the route's match was written with (a prefix
	// replacement's second route, replacePrefix, has the same).
	pathLen int
	created time.Time
	ns      string
	name    string
	rule    int
	match   int
	method  bool
	// listenerPort: the route redirects to the port of its listener (redirectOnPort).
	listenerPort bool
	// grpc: a GRPCRoute's, ordered by the characters of its method match's service and
	// method (serviceLen, methodLen) instead of by path.
	grpc                  bool
	serviceLen, methodLen int
	// host is the rank, on the host the entry is served for, of the route's own
	// hostname that matches it (set per host by portPlan.add).
	host hostnameRank
}

// hostnameRank is what the spec compares first between the routes of one host: the
// characters of the route's own hostname that matches the host when it is not a
// wildcard, then its characters. A route written for abc.example.com wins there over
// one written for *.example.com, whatever their paths and ages; a route without
// hostnames ranks last.
type hostnameRank struct{ exact, chars int }

// rankHostname is the rank of the best of a route's hostnames that matches host (a
// host name or a wildcard, as intersectHostnames made it).
func rankHostname(own []string, host string) hostnameRank {
	var best hostnameRank
	for _, h := range own {
		if h != host && !hostMatches(h, host) {
			continue
		}
		r := hostnameRank{chars: len(h)}
		if !strings.HasPrefix(h, "*") {
			r.exact = len(h)
		}
		if r.exact > best.exact || (r.exact == best.exact && r.chars > best.chars) {
			best = r
		}
	}
	return best
}

// sortByPrecedence orders the routes of one host as the Gateway API spec says, across
// every route attached to it: the route's own matching hostname first (hostnameRank),
// then an Exact path before any prefix, a longer prefix before a
// shorter one, then a method match, then more header matches, then more query
// parameter matches; ties go to the oldest route, then to namespace/name in
// alphabetical order, then to rule and match order within the route. Regular
// expression paths are implementation-specific: they come after exact paths and
// prefixes, longer expressions first.
func sortByPrecedence(entries []routeEntry) {
	slices.SortStableFunc(entries, comparePrecedence)
}

func comparePrecedence(a, b routeEntry) int {
	if c := cmp.Compare(b.host.exact, a.host.exact); c != 0 {
		return c
	}
	if c := cmp.Compare(b.host.chars, a.host.chars); c != 0 {
		return c
	}
	var c int
	switch {
	case a.grpc != b.grpc:
		// Never on one host (refuseKindConflicts): HTTPRoutes first.
		return cmp.Compare(boolInt(a.grpc), boolInt(b.grpc))
	case a.grpc:
		c = compareGRPCMatches(a, b)
	default:
		c = compareHTTPMatches(a, b)
	}
	if c != 0 {
		return c
	}
	return compareOrigins(a, b)
}

// compareGRPCMatches orders GRPCRoute matches as the spec says: more characters in
// the service, then in the method, then more header matches (the POST condition
// aside) first.
func compareGRPCMatches(a, b routeEntry) int {
	if c := cmp.Compare(b.serviceLen, a.serviceLen); c != 0 {
		return c
	}
	if c := cmp.Compare(b.methodLen, a.methodLen); c != 0 {
		return c
	}
	return cmp.Compare(len(b.route.Headers), len(a.route.Headers))
}

// compareHTTPMatches orders HTTPRoute matches: path kind and length, method, headers,
// query parameters.
func compareHTTPMatches(a, b routeEntry) int {
	if c := cmp.Compare(pathRank(a.route.Path.Kind), pathRank(b.route.Path.Kind)); c != 0 {
		return c
	}
	if c := cmp.Compare(b.pathLen, a.pathLen); c != 0 {
		return c
	}
	if a.method != b.method {
		if a.method {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(len(b.route.Headers)-boolInt(b.method), len(a.route.Headers)-boolInt(a.method)); c != 0 {
		return c
	}
	return cmp.Compare(len(b.route.Query), len(a.route.Query))
}

// compareOrigins breaks ties: the oldest route, then namespace/name, then rule and
// match order.
func compareOrigins(a, b routeEntry) int {
	if c := a.created.Compare(b.created); c != 0 {
		return c
	}
	if c := strings.Compare(a.ns, b.ns); c != 0 {
		return c
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	if c := cmp.Compare(a.rule, b.rule); c != 0 {
		return c
	}
	return cmp.Compare(a.match, b.match)
}

func pathRank(k dag.PathMatchKind) int {
	switch k {
	case dag.PathExact:
		return 0
	case dag.PathRegex:
		return 2
	}
	return 1
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
