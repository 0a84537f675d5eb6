package filter

import "net/textproto"

// HeaderMap is a Headers kept in a map of canonical names, for requests that
// do not come from a codec (tests, subrequests).
type HeaderMap map[string][]string

// key is name in canonical form, as textproto.CanonicalMIMEHeaderKey gives
// it. Filters ask for names spelt canonically already (Content-Type,
// Accept-Encoding), for which a look at the letters' case is enough: that
// function also checks every byte's validity first, which costs as much
// again and changes nothing for such a name (it returns an invalid one as
// it is too).
func key(name string) string {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return textproto.CanonicalMIMEHeaderKey(name)
		}
		upper = c == '-'
	}
	return name
}

func (h HeaderMap) Get(name string) string {
	if v := h[key(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (h HeaderMap) Values(name string) []string { return h[key(name)] }
func (h HeaderMap) Set(name, value string)      { h[key(name)] = []string{value} }
func (h HeaderMap) Add(name, value string)      { k := key(name); h[k] = append(h[k], value) }
func (h HeaderMap) Del(name string)             { delete(h, key(name)) }

func (h HeaderMap) Range(fn func(name, value string) bool) {
	for k, vs := range h {
		for _, v := range vs {
			if !fn(k, v) {
				return
			}
		}
	}
}
