#!/usr/bin/env bash
# Builds etcd, kube-apiserver and kube-controller-manager from Go modules (only Go and the
# module proxy are needed) for the tests in internal/kubetest, plus echo-basic (the Gateway
# API conformance suite's echo server, from the small module in images/, whose requirements
# would otherwise move Kubernetes' own), and prints the directory that holds them.
#
# Usage: hack/kube/build.sh [OUTDIR]
#
# Without OUTDIR the binaries go to
#   ${PORTICO_KUBE_CACHE:-$HOME/.cache/portico/kube}/<kubernetes version>-<hash>/
# where <hash> covers this script, both modules' go.mod and go.sum and the main packages, so a change
# to any of them builds afresh instead of reusing stale binaries. Nothing is built when
# all binaries are already there. Concurrent runs (several test packages starting at
# once) wait for each other on a lock file instead of building twice.
#
# stdout is only the directory (for scripts and tests); progress goes to stderr.
# A cold build (empty module and build caches) takes about 1250 CPU-seconds (etcd and
# kube-apiserver ~700, kube-controller-manager ~510, echo-basic ~40: 10-12 minutes on two
# idle cores) and 2.6 GB of memory for the largest compile/link; with the Go build cache
# warm it is a relink of under a minute. GOFLAGS=-p=1 runs one compile at a time (less
# memory).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
. ../toolchain.sh

version=$(awk '$1 == "k8s.io/kubernetes" {print $2; exit}' go.mod)
[ -n "$version" ] || { echo "build.sh: no k8s.io/kubernetes requirement in $here/go.mod" >&2; exit 1; }

if [ $# -ge 1 ]; then
  out=$1
else
  hash=$(cat build.sh go.mod go.sum cmd/*/*.go images/go.mod images/go.sum | sha256sum | cut -c1-12)
  out=${PORTICO_KUBE_CACHE:-${HOME:?HOME is not set}/.cache/portico/kube}/$version-$hash
fi

bins=(etcd kube-apiserver kube-controller-manager echo-basic)
have() {
  local b
  for b in "${bins[@]}"; do [ -x "$out/$b" ] || return 1; done
}

if ! have; then
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  exec 9>"$out/.lock"
  flock 9
  if ! have; then
    echo "build.sh: building ${bins[*]} ($version) into $out (cold: about 1250 CPU-seconds, 10-12 minutes on 2 idle cores)" >&2
    start=$(date +%s)
    tmp=$(mktemp -d "$out/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    minor=${version#v1.}; minor=${minor%%.*}
    pkg=k8s.io/component-base/version
    ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    # Static binaries like upstream's; GOFLAGS from the caller (e.g. -p=1 to bound memory)
    # still apply. -mod=mod is not needed: go.sum is complete.
    CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags="$ldflags" -o "$tmp/" ./cmd/etcd ./cmd/kube-apiserver ./cmd/kube-controller-manager
    # As upstream's Dockerfile builds it.
    (cd images && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags="-s -w" -o "$tmp/echo-basic" sigs.k8s.io/gateway-api-conformance-images/echo-basic)
    for b in "${bins[@]}"; do mv "$tmp/$b" "$out/$b"; done
    echo "build.sh: built in $(( $(date +%s) - start ))s" >&2
  fi
  exec 9>&-
fi

cd "$out" && pwd
