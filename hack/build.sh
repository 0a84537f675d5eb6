#!/usr/bin/env bash
# Builds cmd/portico from this source tree into bin/portico (or the path given), with
# the commit `portico version` prints taken from git. A plain `go build` records it only
# in an ordinary clone, and not when the Go environment sets GOFLAGS=-buildvcs=false (a
# common fix for "error obtaining VCS status") nor in a git worktree, whose .git is a
# file the toolchain does not recognise.
#
#   hack/build.sh                  # bin/portico
#   hack/build.sh /tmp/portico     # elsewhere; extra arguments go to go build
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/toolchain.sh
out=${1:-bin/portico}
shift || true

ldflags=()
if rev=$(git rev-parse HEAD 2>/dev/null); then
  # As the toolchain's own stamp: any change, untracked files included, is -dirty.
  if [[ -n $(git status --porcelain 2>/dev/null) ]]; then
    rev+=-dirty
  fi
  ldflags=(-ldflags "-X github.com/portico-dev/portico/internal/version.revision=$rev")
fi
mkdir -p "$(dirname "$out")"
go build "${ldflags[@]}" "$@" -o "$out" ./cmd/portico
