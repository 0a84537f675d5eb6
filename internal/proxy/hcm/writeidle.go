package hcm

import (
	"context"
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

// ConnWriteBoundKey is the context key under which a connection whose socket
// writes are bounded by its chain's stream idle timeout as a whole (one Go's
// HTTP/2 server serves: the listener's) offers a ConnWriteBound.
type ConnWriteBoundKey struct{}

// ConnWriteBound is a connection's bound on its socket writes, which its
// streams' routes can loosen.
type ConnWriteBound interface {
	// AllowIdle has the connection's writes wait for progress for at least
	// d (0: for ever) from now on.
	AllowIdle(d time.Duration)
}

// setWriteIdleTimeout gives w's codec the stream idle timeout of a route that
// overrides the connection manager's (its idle_timeout), so that a client that
// stops reading is cut by the route's. On an HTTP/2 connection, whose streams
// share the socket, the route's timeout loosens the connection's bound
// instead (ConnWriteBound): a route that lets a client pause longer than the
// connection manager does must not have the whole connection cut.
func setWriteIdleTimeout(ctx context.Context, w http.ResponseWriter, d time.Duration) {
	for {
		if s, ok := w.(writeIdleSetter); ok {
			s.SetWriteIdleTimeout(d)
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	if b, ok := ctx.Value(ConnWriteBoundKey{}).(ConnWriteBound); ok {
		b.AllowIdle(d)
	}
}
