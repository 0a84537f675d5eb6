// Package listener is the embedded proxy's listeners: the sockets of the
// applied configuration (bound, retried with backoff while their address is
// taken, drained when removed), TLS termination with the filter chain chosen
// by SNI (reading the ClientHello first, as tls_inspector, on a listener
// with tcp_proxy chains), client certificate validation, and tcp_proxy.
// An HTTP chain's requests go to its connection manager (package hcm) with
// the chain they came in on.
//
// It imports hcm, the router (its random source), upstream and the leaves;
// never package proxy (TestLayering). Package proxy compiles each Listener
// into a Config and hands the set of them to Set.Sync.
//
// Files by job:
//
//   - config.go: a listener's compiled configuration (Config, FilterChain)
//     and its TLS spec.
//   - listeners.go: Set: binding (with retries and the start-up grace),
//     draining, the HTTP servers, the addresses the egress guard protects.
//   - tls.go: secrets and certificates to tls.Certificate, the server TLS
//     configuration of a chain, SNI chain selection, the TLS accept loop.
//   - client_cert.go: require_client_certificate, trusted CA, CRLs, and the
//     certificate a chain serves (x-forwarded-client-cert's By).
//   - proxyproto.go: the PROXY protocol header (envoy.filters.listener.proxy_protocol):
//     its parser, and proxyConn, through which the header's addresses become the
//     connection's.
//   - tcpproxy.go: tcp_proxy chains: upstream connection attempts, copying
//     both ways with half-closes, the idle timeout, draining, a
//     connection's access log line and series.
package listener
