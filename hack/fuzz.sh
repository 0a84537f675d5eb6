#!/usr/bin/env bash
# Long fuzzing sessions, for a nightly job or before a release (hack/test.sh runs a short,
# execution-bounded pass on every change).
#
# Usage: hack/fuzz.sh [DURATION]      e.g. hack/fuzz.sh 10m   (default 5m per target)
#
# A time-bounded run can end with a bare "context deadline exceeded" and no failing input
# when the machine is loaded: a race in Go's fuzz coordinator (go.dev/issue/75804, fixed in
# Go 1.27). Such an ending is reported as a timing artefact, not a finding; a real finding
# always writes its input under testdata/fuzz and fails this script.
set -uo pipefail
cd "$(dirname "$0")/.."
. hack/toolchain.sh
duration=${1:-5m}
status=0

fuzz() { # PACKAGE TARGET
  local out
  out=$(mktemp)
  printf '\n==> %s %s for %s\n' "$1" "$2" "$duration"
  if go test -run='^$' -fuzz="^$2\$" -fuzztime="$duration" "$1" 2>&1 | tee "$out"; then
    :
  elif grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written to' "$out"; then
    echo "$2: the run ended on Go's fuzz coordinator deadline race, no failing input: not a finding"
  else
    status=1
  fi
  rm -f "$out"
}

fuzz ./internal/source/manifest/ FuzzDecode
fuzz ./internal/xds/translate/ FuzzBuildAndTranslate
fuzz ./internal/dag/ FuzzHTTPProxyConditions
fuzz ./internal/proxy/filters/compressor/ FuzzChoose
fuzz ./internal/proxy/filters/grpcweb/ FuzzBase64Decoder
fuzz ./internal/proxy/filters/grpcweb/ FuzzTextResponse
fuzz ./internal/proxy/router/ FuzzParseHeaderFormat
fuzz ./internal/dag/ FuzzServiceAnnotations
fuzz ./internal/proxy/http1/ FuzzRequestDifferential
fuzz ./internal/proxy/http1/ FuzzResponseDifferential
fuzz ./internal/proxy/http1/ FuzzTargetLikeNetURL
fuzz ./internal/proxy/upstream/ FuzzNewResponseLikeNetHTTP
exit "$status"
