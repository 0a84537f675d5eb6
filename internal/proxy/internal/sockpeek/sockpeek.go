// Package sockpeek looks at what waits in a TCP socket's receive queue,
// without blocking and without consuming it: the upstream client asks whether
// a pooled connection received anything while idle, the listener whether a
// client sent bytes that closing its connection would answer with a reset.
// It also writes a request and waits for its answer without reading
// (LookWriteAwait): the upstream client's exchanges on pooled connections.
package sockpeek

// State is what a look found.
type State int

const (
	// Empty: nothing has arrived.
	Empty State = iota
	// Data: bytes wait unread.
	Data
	// Closed: the peer ended its side (or reset it), or the socket failed.
	Closed
)
