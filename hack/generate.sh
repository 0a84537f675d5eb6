#!/usr/bin/env bash
# Regenerates what controller-gen derives from the API types in apis/: the deepcopy
# methods (apis/**/zz_generated.deepcopy.go) and the CRDs (deploy/crds/, which holds
# nothing else), copied as they are into the Helm chart (deploy/helm/portico/crds/: Helm
# reads a chart's CRDs from its own crds/ directory, and a packaged chart cannot refer to
# files outside it).
#
# Usage: hack/generate.sh            regenerate in place
#        hack/generate.sh --verify   regenerate into a temporary copy and fail, showing
#                                    the difference, if the tree is not up to date; the
#                                    tree is never modified (hack/test.sh runs this)
#
# controller-gen is pinned in tools/go.mod and run with `go tool`, so only Go is needed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/hack/toolchain.sh"

# generate ROOT: runs both generators in ROOT, a directory holding go.mod, go.sum and apis/.
generate() {
  local root=$1
  local gen=(go tool -modfile="$repo/tools/go.mod" controller-gen)
  (
    cd "$root"
    find apis -name 'zz_generated.*.go' -delete # a type that no longer needs one keeps none
    rm -rf deploy/crds && mkdir -p deploy/crds   # a renamed type leaves no stale CRD
    "${gen[@]}" object paths=./apis/...
    "${gen[@]}" crd paths=./apis/... output:crd:artifacts:config=deploy/crds
    rm -rf deploy/helm/portico/crds && mkdir -p deploy/helm/portico
    cp -R deploy/crds deploy/helm/portico/crds
  )
}

case "${1:-}" in
  "")
    generate "$repo"
    ;;
  --verify)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp "$repo/go.mod" "$repo/go.sum" "$tmp/"
    cp -R "$repo/apis" "$tmp/apis"
    generate "$tmp"
    if ! diff -ru "$repo/apis" "$tmp/apis" || ! diff -ru "$repo/deploy/crds" "$tmp/deploy/crds" ||
      ! diff -ru "$repo/deploy/helm/portico/crds" "$tmp/deploy/helm/portico/crds"; then
      echo "generated files are out of date: run hack/generate.sh and commit the result" >&2
      exit 1
    fi
    ;;
  *)
    echo "usage: $0 [--verify]" >&2
    exit 2
    ;;
esac
