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
//   - proxy (this package): wiring: the ADS sink, xDS resources to specs,
//     compiled snapshots and their application, the route metrics'
//     lifecycle, the Proxy.
//   - xdsclient: the ADS stream; this package is its Sink.
//   - listener: sockets, TLS and SNI chain selection, client certificates,
//     tcp_proxy; hands HTTP chains' requests to their connection manager.
//   - hcm: the HTTP connection manager, the request path: edge headers,
//     limits, the HTTP filter chain, forwarding (timeouts, retries, bodies,
//     mirrors, internal redirects), the access log line, route metrics.
//   - router: route tables, matching, route conversion and the routes'
//     policies (header mutations, rewrites, hash, retry, mirror, redirect).
//   - filters/<name>: one HTTP filter each, registered in filters.go; they
//     see package filter only.
//   - filter: the HTTP filter chain contract.
//   - upstream: clusters and everything that reaches their endpoints.
//   - accesslog, stats, internal/xdsconv, internal/layered, internal/sorted:
//     leaves (access log lines, the series lifecycle of the metrics, NACK
//     helpers, the maps a snapshot shares with the one patched from it,
//     keys in order); internal/xdstest: xDS values the tests share.
//
// Files of this package by job:
//
//   - resources.go: decoding and validation of responses; the accepted store;
//     the xdsclient.Sink adapter. vhds.go: VirtualHost resources and the
//     route tables patched with them (router builds the tables).
//   - convert_listener.go: listeners and their filter chains to the proxy's
//     specs, each layer converting its part with the filter registry of
//     filters.go where it needs it (hcm.Convert, router.ConvertRouteConfig,
//     listener.ConvertTCPProxy; clusters: upstream.ConvertCluster); what
//     cannot be honoured is an error.
//   - compile.go: linking specs into an immutable snapshot (warming), applying
//     it; the clusters' state kept across swaps (upstream.ClusterState).
//   - metrics.go: the proxy's own metrics, and the route metrics' lifecycle:
//     resolved per route at compile time (hcm.RouteStats), each series
//     created by the first request it counts and deleted with the last route
//     that uses it.
//   - protect.go: the addresses the egress guard protects (the listeners').
//   - filter_upstreams.go: clusters reached from filters and mirrors
//     (filter.Env).
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
