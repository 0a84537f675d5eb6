#!/usr/bin/env bash
# Runs every check CI runs: formatting, vet, generated code up to date, staticcheck, the
# tests with the race detector, and a short fuzzing pass over the parsers and the builder.
#
# Usage: hack/test.sh
#
# The fuzzing pass is bounded by a number of executions, not by time, so that a loaded
# machine makes it slower, never red (Go 1.26's fuzz coordinator can fail a time-bounded
# run with "context deadline exceeded" when its deadline fires under load: go.dev/issue/75804).
# FUZZ_DECODE_EXECS and FUZZ_BUILD_EXECS change the counts; hack/fuzz.sh runs long sessions.
#
# Each step's wall time is printed at the end: on a cold machine most of it is compiling
# (the Kubernetes dependencies, once without and once with -race, and kube-apiserver).
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolchain.sh

timings=()
step_name=""
step_start=$SECONDS
step() {
  end_step
  step_name="$*"
  step_start=$SECONDS
  printf '\n==> %s\n' "$*"
}
end_step() {
  if [ -n "$step_name" ]; then
    timings+=("$(printf '%5ss  %s' "$((SECONDS - step_start))" "$step_name")")
  fi
  step_name=""
}
summary() {
  end_step
  printf '\n==> time per step\n'
  printf '%s\n' "${timings[@]}"
  printf '%5ss  total\n' "$SECONDS"
}
trap summary EXIT

# kube-apiserver and etcd are a separate module that nothing else compiles: building them
# (6-12 minutes cold on two cores, cached afterwards) overlaps with the steps that need
# no Kubernetes server, and is waited for before the tests.
kube_log=$(mktemp)
hack/kube/build.sh >"$kube_log" 2>&1 &
kube_pid=$!
trap 'kill $kube_pid 2>/dev/null || true; rm -f "$kube_log"; summary' EXIT

step "gofmt"
unformatted=$(find . -name '*.go' -not -path './.git/*' -print0 | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# test/helm is a module of its own (the Helm SDK's dependencies stay out of go.mod and
# of every build of portico): ./... does not reach it, so each step runs it too.
helm_module() { (cd test/helm && "$@"); }
# test/conformance too: the Gateway API conformance suite's dependencies (controller-runtime)
# stay out of Portico's go.mod.
conformance_module() { (cd test/conformance && "$@"); }
# test/contour too: it fetches Contour's release with the go command (CI must reach the
# module proxy: the corpus test fails rather than skips with CI set).
contour_module() { (cd test/contour && "$@"); }

step "go vet"
go vet ./...
helm_module go vet ./...
conformance_module go vet ./...
contour_module go vet ./...

step "generated code (deepcopy, CRDs) is up to date"
hack/generate.sh --verify

step "staticcheck"
go tool -modfile=tools/go.mod staticcheck ./...
helm_module go tool -modfile=../../tools/go.mod staticcheck ./...
conformance_module go tool -modfile=../../tools/go.mod staticcheck ./...
contour_module go tool -modfile=../../tools/go.mod staticcheck ./...

step "kube-apiserver and etcd for the Kubernetes tests (built from Go modules, cached)"
# Built here, not inside `go test`, whose 10-minute timeout a cold build could exceed.
if ! wait "$kube_pid"; then
  cat "$kube_log"; echo "building kube-apiserver and etcd failed"; exit 1
fi

step "go test -race"
# hack/image's test compiles a static binary from scratch (CGO_ENABLED=0, -trimpath share
# no compiled package with the race build): minutes on a cold cache, hence the timeout.
go test -race -count=1 -timeout=25m ./...

step "go test -race, the Helm chart (test/helm)"
helm_module go test -race -count=1 -timeout=15m ./...

step "Contour's examples and documentation (test/contour)"
contour_module go test -race -count=1 ./...

step "Gateway API conformance suite (test/conformance; hack/conformance.sh writes the report)"
conformance_module go test -count=1 -timeout=25m ./...

step "fuzz (${FUZZ_DECODE_EXECS:=20000} and ${FUZZ_BUILD_EXECS:=1500} executions)"
go test -run='^$' -fuzz='^FuzzDecode$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/source/manifest/
go test -run='^$' -fuzz='^FuzzBuildAndTranslate$' -fuzztime="${FUZZ_BUILD_EXECS}x" ./internal/xds/translate/
go test -run='^$' -fuzz='^FuzzHTTPProxyConditions$' -fuzztime="${FUZZ_BUILD_EXECS}x" ./internal/dag/
# The parsers of what clients and Services send: PROXY protocol headers, Accept-Encoding, gRPC-Web bodies (base64
# and frames), header value operators, circuit breaker and protocol annotations.
go test -run='^$' -fuzz='^FuzzChoose$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/filters/compressor/
go test -run='^$' -fuzz='^FuzzBase64Decoder$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/filters/grpcweb/
go test -run='^$' -fuzz='^FuzzTextResponse$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/filters/grpcweb/
go test -run='^$' -fuzz='^FuzzParseHeaderFormat$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/router/
go test -run='^$' -fuzz='^FuzzServiceAnnotations$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/dag/
go test -run='^$' -fuzz='^FuzzParseProxyHeader$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/listener/
# The HTTP/1.1 codec's parser against net/http's, on requests and on upstream responses
# (docs/dev/http1-corpus.md, "Differential fuzzing against net/http").
go test -run='^$' -fuzz='^FuzzRequestDifferential$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/http1/
go test -run='^$' -fuzz='^FuzzResponseDifferential$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/http1/
# The codec's reading of a request target (its allocation-free path) against url.ParseRequestURI's.
go test -run='^$' -fuzz='^FuzzTargetLikeNetURL$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/http1/
# The upstream client's *http.Response against http.ReadResponse's, for responses both accept.
go test -run='^$' -fuzz='^FuzzNewResponseLikeNetHTTP$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/upstream/
# The access log's own lines against slog's handlers' (internal/proxy/accesslog/direct.go).
go test -run='^$' -fuzz='^FuzzDirectLineLikeSlog$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/accesslog/
go test -run='^$' -fuzz='^FuzzStampCacheLikeTime$' -fuzztime="${FUZZ_DECODE_EXECS}x" ./internal/proxy/accesslog/
