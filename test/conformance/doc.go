// Package conformance runs the Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance, the release Portico implements) against `portico
// serve` and a real kube-apiserver, with kube-controller-manager and the project's node
// agent running the suite's workloads and each Gateway's data plane (the embedded proxy,
// deployed by serve's provisioner as it deploys Envoy in a cluster) as local processes.
//
// It is a module of its own: the suite's dependencies (controller-runtime, testify) stay
// out of Portico's go.mod. Run it with hack/conformance.sh, which writes the report into
// docs/conformance/; hack/test.sh runs it too.
package conformance
