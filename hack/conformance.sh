#!/usr/bin/env bash
# Runs the Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance v1.7.0,
# profiles GATEWAY-HTTP, GATEWAY-GRPC and GATEWAY-TLS) against `portico serve` and a real
# kube-apiserver with kube-controller-manager and the project's node agent, and writes the
# suite's ConformanceReport.
#
# Usage: hack/conformance.sh [REPORT]   (default docs/conformance/gateway-api-v1.7.0-report.yaml)
#        PORTICO_CONFORMANCE_RUN=HTTPRouteSimpleSameNamespace,GRPCExactMethodMatching hack/conformance.sh /tmp/some.yaml
#
# Needs root and iproute2 (the node agent gives each Pod a network namespace), like
# hack/test.sh. The Kubernetes binaries are built first (hack/kube/build.sh, cached).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolchain.sh
report=$(realpath -m "${1:-docs/conformance/gateway-api-v1.7.0-report.yaml}")
mkdir -p "$(dirname "$report")"
hack/kube/build.sh >/dev/null
cd test/conformance
PORTICO_CONFORMANCE_ALL=1 PORTICO_CONFORMANCE_REPORT="$report" go test -count=1 -timeout=40m -run '^TestGatewayAPIConformance$' -v ./ 2>&1 |
  grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok)|conformance.go|report' || true
echo "report: $report"
