// Package helm tests the Helm chart deploy/helm/portico: rendered with the Helm SDK, it
// must hold the objects of deploy/ for its default values, follow its values, pass
// Helm's lint, and be accepted by a real kube-apiserver (internal/kubetest).
//
// It is a module of its own so that the Helm SDK's dependencies (kubectl, cli-runtime,
// controller-runtime, OCI registry clients, ...) stay out of the main module's go.mod and
// out of every build of `portico`; hack/test.sh vets, checks and tests it.
package helm
