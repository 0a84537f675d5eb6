package proxy

import (
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
)

// defaultRouteTimeout is Envoy's route timeout when RouteAction.timeout is unset.
const defaultRouteTimeout = 15 * time.Second

// routeTable is a compiled RouteConfiguration. It is immutable once built and
// shared by every snapshot that references it.
type routeTable struct {
	name     string
	exact    map[string]*virtualHost // lower-cased domain -> vhost
	suffixes []wildcardDomain        // "*<suffix>" domains, longest suffix first
	prefixes []wildcardDomain        // "<prefix>*" domains, longest prefix first
	any      *virtualHost            // the "*" domain
	clusters []string                // every cluster name referenced, for completeness checks
	vhosts   []*virtualHost          // in order, vhosts[i].index == i
}

type wildcardDomain struct {
	affix string // the domain without its '*'
	vhost *virtualHost
}

type virtualHost struct {
	name   string
	index  int // in routeTable.vhosts, for per-configuration tables such as metrics
	routes []*route
}

type route struct {
	name  string
	label string // name, or "#<index>" when unnamed: metrics and access log
	index int    // in virtualHost.routes
	match routeMatch
	// exactly one of the following is set
	forward  *forwardAction
	redirect *redirectAction
	direct   *directResponse
}

type pathMatchKind int

const (
	pathPrefix pathMatchKind = iota
	pathExact
	pathSeparatedPrefix
	pathRegex
)

type routeMatch struct {
	kind          pathMatchKind
	value         string // prefix / path / separated prefix
	re            *regexp.Regexp
	caseSensitive bool
	headers       []headerMatcher
}

// headerMatcher is an Envoy HeaderMatcher restricted to string and present matches.
type headerMatcher struct {
	name                string // lower-case
	present             bool   // for present_match
	isPresentMatch      bool
	str                 stringMatcher
	invert              bool
	treatMissingAsEmpty bool
}

type stringMatchKind int

const (
	strExact stringMatchKind = iota
	strPrefix
	strSuffix
	strContains
	strRegex
)

type stringMatcher struct {
	kind       stringMatchKind
	value      string
	re         *regexp.Regexp
	ignoreCase bool
}

// forwardAction is a RouteAction: proxy to one of its clusters.
type forwardAction struct {
	clusters []weightedCluster
	total    uint64
	// timeout runs from the end of the downstream request (its body) to the
	// end of the response, as Envoy's route timeout; 0 means none.
	timeout          time.Duration
	prefixRewrite    string
	hasPrefixRewrite bool
	// notFoundStatus is returned when the picked cluster is not in the snapshot.
	notFoundStatus int
	retry          *retryPolicy // never nil (noRetries)
	// idleTimeout overrides the HCM's stream_idle_timeout when
	// hasIdleTimeout; 0 disables the idle timeout.
	idleTimeout    time.Duration
	hasIdleTimeout bool
	hashPolicies   []hashPolicy // for RING_HASH and MAGLEV clusters
}

type weightedCluster struct {
	name   string
	weight uint64
}

type redirectAction struct {
	scheme           string // "" keeps the request's scheme
	host             string // "" keeps the request's host
	port             uint32 // 0 keeps the request's port
	path             string
	hasPath          bool
	prefixRewrite    string
	hasPrefixRewrite bool
	stripQuery       bool
	status           int
}

type directResponse struct {
	status int
	body   []byte
}

// requestInfo is what route matching looks at.
type requestInfo struct {
	method    string
	scheme    string
	authority string // Host with the port stripped, as received (not lower-cased)
	path      string // normalized path without the query string
	rawQuery  string
	header    http.Header
}

// selectVirtualHost follows Envoy: exact domain, then the longest "*suffix"
// wildcard (which may cover several labels), then the longest "prefix*"
// wildcard, then "*". Matching is case-insensitive.
func (t *routeTable) selectVirtualHost(host string) *virtualHost {
	h := strings.ToLower(host)
	if vh, ok := t.exact[h]; ok {
		return vh
	}
	for _, w := range t.suffixes {
		// The wildcard must stand for at least one character.
		if len(h) > len(w.affix) && strings.HasSuffix(h, w.affix) {
			return w.vhost
		}
	}
	for _, w := range t.prefixes {
		if len(h) > len(w.affix) && strings.HasPrefix(h, w.affix) {
			return w.vhost
		}
	}
	return t.any
}

// selectRoute returns the first route that matches: the translator orders
// routes, so the proxy never reorders them.
func (vh *virtualHost) selectRoute(ri *requestInfo) *route {
	for _, r := range vh.routes {
		if r.match.matches(ri) {
			return r
		}
	}
	return nil
}

func (m *routeMatch) matches(ri *requestInfo) bool {
	if !m.pathMatches(ri.path) {
		return false
	}
	for i := range m.headers {
		if !m.headers[i].matches(ri) {
			return false
		}
	}
	return true
}

func (m *routeMatch) pathMatches(path string) bool {
	switch m.kind {
	case pathExact:
		if m.caseSensitive {
			return path == m.value
		}
		return strings.EqualFold(path, m.value)
	case pathPrefix:
		return hasPrefixFold(path, m.value, !m.caseSensitive)
	case pathSeparatedPrefix:
		if !hasPrefixFold(path, m.value, !m.caseSensitive) {
			return false
		}
		return len(path) == len(m.value) || path[len(m.value)] == '/'
	case pathRegex:
		// case_sensitive does not apply to regexes, as in Envoy.
		return m.re.MatchString(path)
	}
	return false
}

// matchedPrefixLen is the length of the path portion that prefix_rewrite
// replaces: the prefix for prefix matches, the whole path otherwise.
func (m *routeMatch) matchedPrefixLen(path string) int {
	switch m.kind {
	case pathPrefix, pathSeparatedPrefix:
		return len(m.value)
	}
	return len(path)
}

func hasPrefixFold(s, prefix string, fold bool) bool {
	if len(s) < len(prefix) {
		return false
	}
	if fold {
		return strings.EqualFold(s[:len(prefix)], prefix)
	}
	return s[:len(prefix)] == prefix
}

// matches implements Envoy's HeaderUtility::matchHeaders semantics, including
// its handling of absent headers with invert_match.
func (hm *headerMatcher) matches(ri *requestInfo) bool {
	value, ok := ri.headerValue(hm.name)
	if !ok {
		if !hm.treatMissingAsEmpty {
			if hm.invert {
				return !hm.isPresentMatch
			}
			return hm.isPresentMatch && !hm.present
		}
		value = ""
	}
	var match bool
	if hm.isPresentMatch {
		match = hm.present
	} else {
		match = hm.str.matches(value)
	}
	return match != hm.invert
}

func (sm *stringMatcher) matches(v string) bool {
	if sm.kind == strRegex {
		return sm.re.MatchString(v)
	}
	value := sm.value
	if sm.ignoreCase {
		v, value = strings.ToLower(v), strings.ToLower(value)
	}
	switch sm.kind {
	case strExact:
		return v == value
	case strPrefix:
		return strings.HasPrefix(v, value)
	case strSuffix:
		return strings.HasSuffix(v, value)
	case strContains:
		return strings.Contains(v, value)
	}
	return false
}

// headerValue returns a header as Envoy sees it: pseudo-headers map to the
// request line, and repeated headers are joined with ",".
func (ri *requestInfo) headerValue(name string) (string, bool) {
	switch name {
	case ":authority", "host":
		return ri.authority, true
	case ":path":
		if ri.rawQuery != "" {
			return ri.path + "?" + ri.rawQuery, true
		}
		return ri.path, true
	case ":method":
		return ri.method, true
	case ":scheme":
		return ri.scheme, true
	}
	values := ri.header.Values(name)
	if len(values) == 0 {
		return "", false
	}
	return strings.Join(values, ","), true
}

// fullMatchRegexp compiles an RE2 pattern anchored at both ends, since Envoy's
// safe_regex matchers require a full match.
func fullMatchRegexp(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

// sortWildcards orders wildcard domains longest first so that the most
// specific one wins.
func sortWildcards(ws []wildcardDomain) {
	sort.SliceStable(ws, func(i, j int) bool { return len(ws[i].affix) > len(ws[j].affix) })
}
