package compressor

import (
	"strconv"
	"strings"

	"github.com/portico-dev/portico/internal/proxy/filter"
)

// registryKey keeps, in the request's stream, the compressor filters that
// saw the request's Accept-Encoding: a *config when one did and left the
// header in the request (the usual case, which costs nothing), a *registry
// otherwise.
type registryKey struct{}

// registry is what the chain's compressors share about one request, as
// Envoy's "compressors" filter state and its cached encoding decision.
type registry struct {
	entries  []registered
	decided  bool
	encoding string
}

type registered struct {
	c      *config
	accept string // the Accept-Encoding it saw
}

// register records that c saw the request's Accept-Encoding values.
func register(s *filter.Stream, c *config, values []string, removing bool) {
	accept := strings.Join(values, ",")
	switch prev := s.State(registryKey{}).(type) {
	case nil:
		if !removing {
			s.SetState(registryKey{}, c)
			return
		}
		s.SetState(registryKey{}, &registry{entries: []registered{{c, accept}}})
	case *config:
		// The first compressor left the header as it is now.
		s.SetState(registryKey{}, &registry{entries: []registered{{prev, accept}, {c, accept}}})
	case *registry:
		prev.entries = append(prev.entries, registered{c, accept})
	}
}

// chosen reports whether c is the compressor the request's Accept-Encoding
// chooses for a response with headers h; the first compressor to ask
// decides for all, as in Envoy.
func chosen(s *filter.Stream, c *config, h filter.Headers) bool {
	ct, _ := mediaType(h)
	switch st := s.State(registryKey{}).(type) {
	case *config:
		if st != c {
			return false
		}
		accept := strings.Join(s.Request.Headers.Values("Accept-Encoding"), ",")
		return strings.EqualFold(choose(accept, ct, []registered{{c: c}}), c.lib.encoding)
	case *registry:
		var accept string
		found := false
		for _, e := range st.entries {
			if e.c == c {
				accept, found = e.accept, true
				break
			}
		}
		if !found {
			return false // the request reached c without an Accept-Encoding
		}
		if !st.decided {
			st.decided, st.encoding = true, choose(accept, ct, st.entries)
		}
		return strings.EqualFold(st.encoding, c.lib.encoding)
	}
	return false
}

const (
	identity = "identity"
	wildcard = "*"
)

// candidate is an encoding the proxy can give a response.
type candidate struct {
	encoding    string
	order       int // registration order; identity and * count as 0 once looked at
	chooseFirst bool
}

// choose is Envoy's chooseEncoding: the encoding, among the compressors
// whose content types take ct, that accept's q-values prefer; "identity"
// when none. Encoding names compare as Envoy compares them, case and all.
func choose(accept, ct string, compressors []registered) string {
	var buf [4]candidate
	allowed := buf[:0]
	for _, e := range compressors {
		if ct != "" && !e.c.typeListed(ct) {
			continue
		}
		if find(allowed, e.c.lib.encoding) < 0 {
			allowed = append(allowed, candidate{encoding: e.c.lib.encoding, order: len(allowed), chooseFirst: e.c.chooseFirst})
		}
	}
	type pair struct {
		name string
		q    float64
	}
	var pairBuf [8]pair
	pairs := pairBuf[:0]
	for token := range strings.SplitSeq(accept, ",") {
		if token == "" {
			continue
		}
		name, params, hasParams := strings.Cut(token, ";")
		p := pair{name: strings.TrimSpace(name), q: 1}
		if hasParams {
			if key, value, ok := strings.Cut(params, "="); ok && strings.EqualFold(strings.TrimSpace(key), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(value), 32)
				if err != nil {
					continue // an unreadable q-value drops the token
				}
				p.q = q
			}
		}
		pairs = append(pairs, p)
		if p.q == 0 {
			// Refused, but kept in pairs: "gzip;q=0, *" must not pick gzip.
			if i := find(allowed, p.name); i >= 0 {
				allowed = append(allowed[:i], allowed[i+1:]...)
			}
		}
	}
	if len(pairs) == 0 || len(allowed) == 0 {
		return identity
	}
	choice := pair{name: identity}
	for _, p := range pairs {
		i := find(allowed, p.name)
		if i < 0 && p.name != identity && p.name != wildcard {
			continue
		}
		if p.q > choice.q {
			choice = p
			continue
		}
		if p.q != choice.q {
			continue
		}
		if i < 0 {
			// Envoy looks identity and * up in its map of compressors here,
			// which adds them with registration order 0 and no choose_first.
			allowed = append(allowed, candidate{encoding: p.name})
			continue
		}
		if allowed[i].chooseFirst {
			choice = p
		}
	}
	switch {
	case choice.q == 0:
		return identity
	case choice.name == wildcard:
		return firstRegistered(allowed)
	}
	return choice.name
}

// firstRegistered is the allowed encoding registered first; among equals,
// the first by name, as Envoy's ordered map yields it.
func firstRegistered(allowed []candidate) string {
	best := allowed[0]
	for _, c := range allowed[1:] {
		if c.order < best.order || c.order == best.order && c.encoding < best.encoding {
			best = c
		}
	}
	return best.encoding
}

func find(cs []candidate, encoding string) int {
	for i := range cs {
		if cs[i].encoding == encoding {
			return i
		}
	}
	return -1
}
