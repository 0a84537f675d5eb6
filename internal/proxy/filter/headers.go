package filter

import "net/textproto"

// HeaderMap is a Headers kept in a map of canonical names, for requests that
// do not come from a codec (tests, subrequests).
type HeaderMap map[string][]string

func key(name string) string { return textproto.CanonicalMIMEHeaderKey(name) }

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
