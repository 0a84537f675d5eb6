// Package upstream is the embedded proxy's side of the upstream clusters:
// what a Cluster and a ClusterLoadAssignment say, converted and checked, and
// everything that reaches their endpoints. It knows nothing of listeners,
// routes or the request path; package proxy picks a cluster for a request
// and puts its target in the request context (TargetKey), which the dials
// here read.
//
// Files by job:
//
//   - cluster.go: Cluster and ClusterLoadAssignment conversion (ConvertCluster,
//     ConvertEDSAssignment) into a ClusterSpec, the compiled Cluster, the
//     shared HTTP/1.1 transport (NewTransport) and its dial.
//   - lb.go: lb_policy, panic mode and the per-cluster state kept across
//     configuration swaps (ClusterState); hashlb.go, xxhash.go: RING_HASH and
//     MAGLEV tables.
//   - healthcheck.go: active HTTP and connect-only TCP health checking.
//   - outlier.go: outlier detection (consecutive 5xx, success rate,
//     ejections), its state kept across swaps like the load balancers'; the
//     Outcome of an attempt, as the request path reports it.
//   - tls.go: upstream TLS (SNI, ALPN, Envoy's certificate verification).
//   - protocol.go: HTTP/1.1, h2 and h2c upstreams, the idle timeout, and the
//     per-cluster transports they need.
//   - http1.go: the shared HTTP/1.1 client, which makes bodyless exchanges in
//     the request's goroutine and hands the rest to http.Transport.
//   - egress.go: which addresses upstream connections may reach (names never
//     this host's loopback, link-local or unspecified addresses; no endpoint
//     Portico's own listeners, admin, xDS or webhook), checked on the address
//     connected to; refusals logged at most once per cluster and address per
//     10 s.
//   - metrics.go: the series of a Service port (alt_stat_name), shared by its
//     clusters, created by their first event and deleted with the last
//     cluster that uses them (Series).
//
// It imports the leaves stats and internal/xdsconv only, never package proxy
// nor the filters (TestLayering in package proxy asserts it).
package upstream
