package accesslog

import "sync/atomic"

// Unmatched is the vhost, route and route_path of a request that matched no
// virtual host (or, for route and route_path, no route of its virtual host),
// as in the route metrics' labels.
const Unmatched = "(none)"

// Route names where requests were routed, as their lines say it: vhost,
// route, route_path and route_name. The routing tables keep one per route and
// one per virtual host (for its requests that match none of its routes), so
// that a request's entry carries one pointer for the four, and the writer
// formats them once per format rather than reading and quoting four strings
// per line. At 10,000 virtual hosts those strings were cold in the cache on
// every line (issue 22, ninth session). Its fields must not change once a
// line has used it.
type Route struct {
	Vhost, Route, Path, Name string
	// formatted are the four attributes as a text (0) and a JSON (1) line
	// writes them, made by the first line of the format that needs them.
	// JSON's depend on lineWriter.invalidUTF8 too, which is the same for
	// every line a process writes (jsonInvalidUTF8).
	formatted [2]atomic.Pointer[string]
}

// NewVhostRoute is the route of a request that matched a virtual host but none
// of its routes: vhost, and Unmatched for route and route_path.
func NewVhostRoute(vhost string) *Route {
	return &Route{Vhost: vhost, Route: Unmatched, Path: Unmatched}
}

// routed writes r's attributes.
func (l *lineWriter) routed(r *Route) {
	format := 0
	if l.json {
		format = 1
	}
	s := r.formatted[format].Load()
	if s == nil {
		w := lineWriter{json: l.json, invalidUTF8: l.invalidUTF8}
		w.str("vhost", r.Vhost)
		w.str("route", r.Route)
		w.str("route_path", r.Path)
		w.str("route_name", r.Name)
		formatted := string(w.buf)
		s = &formatted
		r.formatted[format].Store(s)
	}
	l.buf = append(l.buf, *s...)
}
