// Package proxy is Portico's embedded data plane: an ADS (incremental xDS)
// client that compiles the subset of Envoy configuration described in
// docs/dev/xds-contract.md into an HTTP(S) reverse proxy built on net/http,
// with TCP proxying (TLS passthrough or termination) by SNI.
//
// The proxy honours the shapes of that contract, plus a few cheap and
// unambiguous extras, and NACKs everything else with an error_detail naming
// the resource and the field, so that a configuration it cannot serve
// faithfully is never silently half-applied.
//
// The proxy is layered; imports point down only (TestLayering asserts it):
//
//   - proxy (this package): wiring, and what the layers below do not own yet:
//     resources to specs, compiled snapshots, listeners, the request path and
//     the router, TCP proxying.
//   - xdsclient: the ADS stream; this package is its Sink.
//   - filters/<name>: one HTTP filter each, registered in filters.go; they
//     see package filter only.
//   - filter: the HTTP filter chain contract.
//   - upstream: clusters and everything that reaches their endpoints.
//   - accesslog, stats, internal/xdsconv: leaves (access log lines, the
//     series lifecycle of the metrics, NACK helpers).
//
// Files of this package by job:
//
//   - resources.go: decoding and validation of responses; the accepted store;
//     the xdsclient.Sink adapter.
//   - convert_*.go, tls.go (convertSecret): listeners, route configurations
//     and secrets to the proxy's specs (clusters: upstream.ConvertCluster);
//     what cannot be honoured is an error. tcpproxy.go (TcpProxy) converts
//     its part.
//   - compile.go: linking specs into an immutable snapshot (warming), applying
//     it; the clusters' state kept across swaps (upstream.ClusterState).
//   - layered.go: the maps a snapshot shares with the one it was patched from.
//   - listeners.go, tls.go: sockets (with bind retries), HTTP servers, SNI
//     filter-chain selection; on a listener with tcp_proxy chains, the
//     ClientHello is read first (tls_inspector) to dispatch each connection.
//     protect.go: the addresses the egress guard protects (the listeners').
//     client_cert.go: client certificate validation of a TLS chain and the
//     x-forwarded-client-cert header it sends upstream.
//   - tcpproxy.go: tcp_proxy chains: upstream connection attempts, copying
//     both ways with half-closes, the idle timeout, draining, a connection's
//     access log line and series.
//   - routing.go: virtual host and route matching (path, headers, query parameters).
//     route_patch.go, route_reuse.go, vhds.go: route tables patched per
//     virtual host instead of rebuilt.
//   - headers.go: route header mutations (request/response_headers_to_add/remove at
//     every level) and their %COMMAND% values, resolved at conversion time.
//   - handler.go: the request path: edge headers, the HTTP filter chain
//     (filters.go: the registry), actions, timeouts, access log.
//   - forward.go: the shared reverse proxy: the request's upstream target,
//     the outgoing request, upstream errors mapped to status codes.
//   - filter_upstreams.go: clusters reached from filters (filter.Env).
//   - mirror.go: request_mirror_policies: copies of forwarded requests sent
//     to mirror clusters in the background, their answers dropped.
//   - rewrite.go, path.go: regex_rewrite of routes and redirects (RE2
//     substitutions); path normalization.
//   - limits.go: the HCM's request header limits (431).
//   - metrics.go: Prometheus metrics of routes, labelled by the declaring
//     object and path (routeLabel, pathLabel), resolved per route at compile
//     time, each series created by the first request it counts and deleted
//     with the last route that uses it (the Service port series are
//     upstream's).
//   - retry.go: retry_policy and the attempts of a request (attemptTransport);
//     body.go: request body tracking and replay for retries.
//   - idle.go: the stream idle timeout (HCM stream_idle_timeout, route idle_timeout).
//   - hashpolicy.go: hash_policy (source IP, header, query parameter,
//     cookie) for upstream's RING_HASH and MAGLEV.
//
// Beyond the contract the proxy also honours: inline route_config, "prefix*"
// domains, the deprecated single-purpose header matchers and
// HeaderValueOption.append, STATIC and LOGICAL_DNS clusters, EDS health
// status, a TLS chain without server_names (default chain), inline
// tls_certificates, server_header_transformation, merge_slashes,
// strip_trailing_host_dot, skip_xff_append, generate_request_id and
// preserve_external_request_id, HCM upgrade_configs (other upgrades get 403),
// cluster_not_found_response_code, dns_lookup_family,
// max_direct_response_body_size_bytes, and the rarer header-mutation and
// retry_on shapes the contract lists next to the translator's (ADD_IF_ABSENT,
// OVERWRITE_IF_EXISTS, keep_empty_value, %REQ(a?b):N%, retriable-4xx,
// refused-stream and the gRPC conditions).
package proxy
