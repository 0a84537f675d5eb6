package translate

import (
	"slices"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/portico-dev/portico/internal/dag"
)

// alpnFor is what an HTTPS host offers in ALPN: HTTP/2 first, as browsers prefer it,
// unless the host is limited to one version (HTTPProxy spec.httpVersions).
func alpnFor(versions []dag.HTTPVersion) []string {
	switch {
	case len(versions) == 0:
		return []string{"h2", "http/1.1"}
	case slices.Equal(versions, []dag.HTTPVersion{dag.HTTP1}):
		return []string{"http/1.1"}
	case slices.Equal(versions, []dag.HTTPVersion{dag.HTTP2}):
		return []string{"h2"}
	}
	return []string{"h2", "http/1.1"}
}

// codecFor is the codec of the connection manager of an HTTPS host: a host limited
// to one version refuses the other outright, including from clients that offer no ALPN.
func codecFor(versions []dag.HTTPVersion) hcmv3.HttpConnectionManager_CodecType {
	switch {
	case slices.Equal(versions, []dag.HTTPVersion{dag.HTTP1}):
		return hcmv3.HttpConnectionManager_HTTP1
	case slices.Equal(versions, []dag.HTTPVersion{dag.HTTP2}):
		return hcmv3.HttpConnectionManager_HTTP2
	}
	return hcmv3.HttpConnectionManager_AUTO
}
