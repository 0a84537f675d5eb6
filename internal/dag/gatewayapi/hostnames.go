package gatewayapi

import "strings"

// The hostname rules of Gateway API, as pure functions. A listener hostname "" matches
// every host; "*.example.com" matches any host under example.com, however many labels
// deep, but not example.com itself.

// hostMatches reports whether host (precise or a wildcard) is within pattern.
func hostMatches(pattern, host string) bool {
	switch {
	case pattern == "":
		return true
	case strings.HasPrefix(pattern, "*."):
		suffix := pattern[1:] // ".example.com"
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	default:
		return pattern == host
	}
}

// intersectHostnames returns the host names a route serves on a listener: the route's
// hostnames within the listener's, a route wildcard narrowed to the listener's
// hostname where the listener is more specific, or the listener's hostname when the
// route has none. "*" stands for any host (neither has a hostname). Empty means the
// route has no hostname in common with the listener.
func intersectHostnames(listener string, route []string) []string {
	if len(route) == 0 {
		if listener == "" {
			return []string{"*"}
		}
		return []string{listener}
	}
	var out []string
	seen := map[string]bool{}
	add := func(h string) {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for _, h := range route {
		h = strings.ToLower(h)
		switch {
		case hostMatches(listener, h):
			add(h)
		case hostMatches(h, listener):
			add(listener)
		}
	}
	return out
}

// specificity orders listener hostnames: a precise name beats any wildcard, a longer
// wildcard beats a shorter one, and any hostname beats none.
func specificity(hostname string) int {
	switch {
	case hostname == "":
		return 0
	case strings.HasPrefix(hostname, "*."):
		return 1 + len(hostname)
	default:
		return 1 << 20
	}
}

// ownerHostname returns, of the listener hostnames on one port, the one that serves
// requests for host: the most specific that matches it (listener isolation: a request
// that a more specific listener matches never reaches a less specific listener's
// routes). ok is false when none matches.
func ownerHostname(listeners []string, host string) (owner string, ok bool) {
	best := -1
	for _, l := range listeners {
		if (host == "*" && l == "") || (host != "*" && hostMatches(l, host)) {
			if s := specificity(l); s > best {
				best, owner = s, l
			}
		}
	}
	return owner, best >= 0
}
