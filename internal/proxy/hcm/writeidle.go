package hcm

import (
	"net/http"
	"time"
)

// writeIdleSetter is the HTTP/1.1 codec's response writer: its writes to the
// client, the flush after the handler returned included, fail once they make
// no progress for the stream idle timeout, the connection manager's unless
// the handler sets another.
type writeIdleSetter interface {
	SetWriteIdleTimeout(time.Duration)
}

// setWriteIdleTimeout gives w's codec the stream idle timeout of a route that
// overrides the connection manager's (its idle_timeout), so that a client that
// stops reading is cut by the route's. Go's HTTP/2 server has no such bound:
// there the connection manager's idle timer alone cuts the stream.
func setWriteIdleTimeout(w http.ResponseWriter, d time.Duration) {
	for {
		if s, ok := w.(writeIdleSetter); ok {
			s.SetWriteIdleTimeout(d)
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}
