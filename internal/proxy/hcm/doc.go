// Package hcm is the embedded proxy's HTTP connection manager: the request
// path of an HTTP filter chain, from the request its listener hands it
// (Handler.Serve) to the response: edge headers, the header
// limits, route selection through package router, the HTTP filter chain,
// the route's action (forwarding with its timeouts, retries, body replay,
// mirrors and internal redirects; redirects; direct responses), the access
// log line and the route's metrics.
//
// It imports the router, the filter chain contract, upstream and the
// leaves; never package proxy nor the listeners above it (TestLayering).
// Package proxy converts each HttpConnectionManager with Convert, compiles
// a Chain per filter chain, and its listeners call Handler.Serve.
//
// Files by job:
//
//   - convert.go: an HttpConnectionManager to a Spec (Convert; the filter
//     registry it is given builds the HTTP filter chain); what cannot be
//     honoured is an error naming the field.
//   - spec.go: the connection manager's compiled configuration (Spec), a
//     chain's (Chain) and what it needs of its listener (Listener).
//   - env.go: what every listener's connection manager shares (Env: access
//     log, metrics, the shared reverse proxy, the filters' environment).
//   - handler.go: the request path: edge headers, the HTTP filter chain
//     (runFilters), actions, the access log line (finish), the response
//     writer that applies filter and route headers to every response.
//   - limits.go: request header limits (431).
//   - forward.go: the shared reverse proxy: the request's upstream target,
//     the outgoing request, upstream errors mapped to status codes.
//   - attempt.go: the attempts of a forwarded request under its retry
//     policy (attemptTransport); body.go: request body tracking and replay
//     for retries.
//   - idle.go: the stream idle timeout (HCM stream_idle_timeout, route
//     idle_timeout).
//   - mirror.go: copies of forwarded requests sent to mirror clusters in the
//     background, their answers dropped.
//   - redirect.go: internal redirects: the upstream's redirect followed in
//     place of answering it.
//   - xfcc.go: the x-forwarded-client-cert header sent upstream.
//   - stats.go: the request metrics, per route (RouteStats, resolved at
//     compile time by package proxy, which owns their lifecycle);
//     routeseries.go: their counts, in one block per route, and the
//     collector that exports them.
package hcm
