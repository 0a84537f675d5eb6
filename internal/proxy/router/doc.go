// Package router is the embedded proxy's route configuration: RDS and VHDS
// route tables converted from xDS, the matching of a request to a virtual
// host and a route, and each route's policies, parsed once at conversion and
// evaluated per request (header mutations, rewrites, hash policy, retry,
// mirror and internal redirect policies). The connection manager (package
// proxy's handler) selects the route through it and carries out its action.
//
// It imports the filter chain contract (the per-filter configuration of
// routes and virtual hosts, parsed by the registry it is given), the rate
// limit filter's route-level rate_limits, upstream (hashing) and the leaves;
// never package proxy (TestLayering).
//
// Files by job:
//
//   - routing.go: the compiled types (RouteTable, VirtualHost, Route,
//     ForwardAction, RequestInfo) and matching: virtual host by domain,
//     route by path, headers, query parameters and runtime fraction.
//   - convert.go: RouteConfiguration, VirtualHost and Route to those types;
//     what cannot be honoured is an error naming the field (a NACK).
//   - route_patch.go, route_reuse.go: route tables patched per virtual host
//     instead of rebuilt (a RouteConfiguration whose virtual hosts are
//     mostly the same bytes, VHDS).
//   - headers.go: request/response_headers_to_add/remove at every level,
//     their %COMMAND% values, and their evaluation per request
//     (RouteHeaders). clientaddr.go: the client's address as the connection
//     manager decides it (use_remote_address, xff_num_trusted_hops).
//   - hashpolicy.go: hash_policy (source IP, header, query parameter,
//     cookie) for upstream's RING_HASH and MAGLEV.
//   - rewrite.go, path.go: regex_rewrite of routes and redirects (RE2
//     substitutions); path normalization.
//   - retry.go: retry_policy (the attempts themselves are the request
//     path's). mirror.go: request_mirror_policies. redirect.go:
//     internal_redirect_policy.
//   - labels.go: the route and path labels of a route's metrics.
package router
