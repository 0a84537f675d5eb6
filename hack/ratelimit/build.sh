#!/usr/bin/env bash
# Builds the envoyproxy/ratelimit service (Envoy's reference global rate limit service,
# which keeps its counters in Redis) from its Go module, for the tests of global rate
# limits (internal/testutil StartRateLimit), and prints the directory that holds it.
#
# Usage: hack/ratelimit/build.sh [OUTDIR]
#
# Without OUTDIR the binary goes to
#   ${PORTICO_RATELIMIT_CACHE:-$HOME/.cache/portico/ratelimit}/<version>-<hash>/ratelimit
# where <hash> covers this script. Nothing is built when the binary is there already;
# concurrent runs wait for each other on a lock file. A cold build (empty module and
# build caches) takes about two minutes on two idle cores.
#
# stdout is only the directory; progress goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../toolchain.sh"

# The module has no replace directives, so `go install pkg@version` builds it with the
# requirements its own go.mod pins.
version=v1.4.1-0.20260122083618-3fb702589d36

if [ $# -ge 1 ]; then
  out=$1
else
  hash=$(sha256sum "$here/build.sh" | cut -c1-12)
  out=${PORTICO_RATELIMIT_CACHE:-${HOME:?HOME is not set}/.cache/portico/ratelimit}/$version-$hash
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ ! -x "$out/ratelimit" ]; then
  exec 9>"$out/.lock"
  flock 9
  if [ ! -x "$out/ratelimit" ]; then
    echo "build.sh: building github.com/envoyproxy/ratelimit@$version into $out" >&2
    tmp=$(mktemp -d "$out/.build.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod GOBIN="$tmp" go install -trimpath -ldflags="-s -w" "github.com/envoyproxy/ratelimit/src/service_cmd@$version"
    mv "$tmp/service_cmd" "$out/ratelimit"
  fi
fi
echo "$out"
