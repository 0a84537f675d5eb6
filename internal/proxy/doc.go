// Package proxy is Portico's embedded data plane: an ADS (xDS state-of-the-world)
// client that compiles the subset of Envoy configuration described in
// docs/dev/xds-contract.md into an HTTP(S) reverse proxy built on net/http,
// with TCP proxying (TLS passthrough or termination) by SNI.
//
// The proxy honours the shapes of that contract, plus a few cheap and
// unambiguous extras, and NACKs everything else with an error_detail naming
// the resource and the field, so that a configuration it cannot serve
// faithfully is never silently half-applied.
//
// Files by job:
//
//   - ads.go: the ADS stream: wildcard subscriptions, ACK/NACK, reconnects.
//   - resources.go: decoding and validation of responses; the accepted store.
//   - convert_*.go, tls.go (convertSecret), upstream.go (convertCluster):
//     Envoy resources to the proxy's specs; what cannot be honoured is an error.
//     upstream_tls.go (UpstreamTlsContext), upstream_protocol.go
//     (HttpProtocolOptions), outlier.go (OutlierDetection) and tcpproxy.go
//     (TcpProxy) convert their parts.
//   - compile.go: linking specs into an immutable snapshot (warming), applying it.
//   - listeners.go, tls.go: sockets (with bind retries), HTTP servers, SNI
//     filter-chain selection; on a listener with tcp_proxy chains, the
//     ClientHello is read first (tls_inspector) to dispatch each connection.
//   - tcpproxy.go: tcp_proxy chains: upstream connection attempts, copying
//     both ways with half-closes, the idle timeout, draining, a connection's
//     access log line and series.
//   - routing.go: virtual host and route matching (path, headers, query parameters).
//   - headers.go: route header mutations (request/response_headers_to_add/remove at
//     every level) and their %COMMAND% values, resolved at conversion time.
//   - handler.go: the request path: edge headers, actions, timeouts, access log.
//   - rewrite.go: regex_rewrite of routes and redirects (RE2 substitutions).
//   - limits.go: the HCM's request header limits (431).
//   - metrics.go: Prometheus metrics; route series labelled by the declaring
//     object and path (routeLabel, pathLabel), resolved per route at compile
//     time, each series created by the first request it counts and deleted
//     with the last route that uses it. metrics_upstream.go: the series of a
//     Service port (alt_stat_name), shared by its clusters.
//   - upstream.go: clusters, the shared transport, error mapping;
//     upstream_http1.go: the shared HTTP/1.1 client, which makes bodyless
//     exchanges in the request's goroutine and hands the rest to http.Transport.
//   - upstream_tls.go: upstream TLS (SNI, ALPN, Envoy's certificate
//     verification); upstream_protocol.go: HTTP/1.1, h2 and h2c upstreams,
//     the idle timeout, and the per-cluster transports they need.
//   - retry.go: retry_policy and the attempts of a request (attemptTransport);
//     body.go: request body tracking and replay for retries.
//   - idle.go: the stream idle timeout (HCM stream_idle_timeout, route idle_timeout).
//   - lb.go: lb_policy, panic mode and the per-cluster state kept across
//     swaps; hashlb.go, hashpolicy.go, xxhash.go: RING_HASH, MAGLEV and
//     hash_policy (source IP, header, query parameter, cookie).
//   - healthcheck.go: active HTTP and connect-only TCP health checking.
//   - egress.go: which addresses upstream connections may reach (names never
//     this host's loopback, link-local or unspecified addresses; no endpoint
//     Portico's own listeners, admin, xDS or webhook), checked on the address
//     connected to; refusals logged at most once per cluster and address per
//     10 s.
//   - outlier.go: outlier detection (consecutive 5xx, success rate,
//     ejections), its state kept across swaps like the load balancers'.
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
