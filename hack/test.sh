#!/usr/bin/env bash
# Runs every check CI runs: formatting, vet, generated code up to date, staticcheck, the
# tests with the race detector, and a short fuzzing pass over the parsers and the builder.
# Usage: hack/test.sh            (FUZZTIME=30s hack/test.sh for longer fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "gofmt"
unformatted=$(find . -name '*.go' -not -path './.git/*' -print0 | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "generated code (deepcopy, CRDs) is up to date"
hack/generate.sh --verify

step "staticcheck"
go tool -modfile=tools/go.mod staticcheck ./...

step "kube-apiserver and etcd for the Kubernetes tests (built from Go modules, cached)"
# Built here, not inside `go test`, whose 10-minute timeout a cold build (6-12 minutes
# on two cores) could exceed.
hack/kube/build.sh >/dev/null

step "go test -race"
go test -race -count=1 ./...

step "fuzz (${FUZZTIME:=10s} each)"
go test -run='^$' -fuzz='^FuzzDecode$' -fuzztime="$FUZZTIME" ./internal/source/manifest/
go test -run='^$' -fuzz='^FuzzBuildAndTranslate$' -fuzztime="$FUZZTIME" ./internal/xds/translate/
