//go:build !linux

package upstream

import "net"

// peeker would look whether an idle connection was closed by the server;
// elsewhere than on Linux, a stale connection is only found out by the request
// failing on it (and retried on a new connection).
type peeker struct{}

func newPeeker(net.Conn) *peeker { return nil }

func (*peeker) peerClosed() bool { return false }
