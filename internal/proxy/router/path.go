package router

import (
	"math/rand/v2"
	"strings"
)

// RemoveDotSegments implements RFC 3986 section 5.2.4 on an escaped absolute
// path, keeping a trailing slash ("/a/b/../c/" -> "/a/c/"). Percent-encoded
// dots ("%2e") count as dots, so that "/public/%2e%2e/admin" cannot slip past
// a prefix route and be resolved by the upstream instead.
func RemoveDotSegments(p string) string {
	if !strings.HasPrefix(p, "/") || !mayHaveDotSegment(p) {
		return p
	}
	segs := strings.Split(p[1:], "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch dotSegment(s) {
		case 1: // "."
			if last {
				out = append(out, "")
			}
		case 2: // ".."
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

func mayHaveDotSegment(p string) bool {
	return strings.Contains(p, "/.") || strings.Contains(p, "/%2e") || strings.Contains(p, "/%2E")
}

// dotSegment returns 1 for ".", 2 for "..", 0 otherwise (with %2e decoding).
func dotSegment(s string) int {
	if len(s) > 6 {
		return 0
	}
	s = strings.ReplaceAll(strings.ReplaceAll(s, "%2e", "."), "%2E", ".")
	switch s {
	case ".":
		return 1
	case "..":
		return 2
	}
	return 0
}

// MergeSlashes collapses runs of '/' (HCM merge_slashes).
func MergeSlashes(p string) string {
	if !strings.Contains(p, "//") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	prevSlash := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '/' && prevSlash {
			continue
		}
		prevSlash = c == '/'
		b.WriteByte(c)
	}
	return b.String()
}

// RandUint64N returns a uniform number in [0, n) for weighted cluster picks.
func RandUint64N(n uint64) uint64 { return rand.Uint64N(n) }

// StripPort returns host without its port (an IPv6 literal keeps its brackets).
func StripPort(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i >= 0 {
			return host[:i+1]
		}
		return host
	}
	if i := strings.IndexByte(host, ':'); i >= 0 && strings.Count(host, ":") == 1 {
		return host[:i]
	}
	return host
}
