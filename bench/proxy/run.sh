#!/usr/bin/env bash
# Compares Portico's embedded proxy (`portico run`) with nginx (1 worker, upstream
# keepalive) on loopback, rounds alternating between the two. The proxy under test is
# pinned to core 0, the load generator (wrk, h2load) and the backend (nginx) to core 1.
# Prints a Markdown table of medians and Portico/nginx ratios. See docs/performance.md.
#
#   bench/proxy/run.sh                 # 3 rounds of 4 s per side and scenario (~5 minutes)
#   QUICK=1 bench/proxy/run.sh         # 1 round of 2 s (~1.5 minutes)
#   PORTICO=/path/to/portico bench/proxy/run.sh   # measure another build
#   bench/proxy/run.sh -scenarios c32,tls -rounds 5   # flags go to the driver
#   bench/proxy/run.sh -baseline /tmp/old/portico     # also measure an older build, same rounds
#   bench/proxy/run.sh -targets        # then say which of issue 22's targets the run meets
#   bench/proxy/run.sh -scenarios c32,vhosts10k       # 10,000 virtual hosts against one
#   go run ./bench/proxy -results /tmp/portico-proxybench-*/results.json -targets   # reprint a run
#
# Needs root for apt-get when nginx, wrk or h2load are missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
. hack/toolchain.sh
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v wrk >/dev/null || missing+=(wrk)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v taskset >/dev/null || missing+=(util-linux)
if ((${#missing[@]})); then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [[ $(nproc) -lt 2 ]]; then
	echo "needs at least 2 CPUs (the proxy on one, the load generator on another)" >&2
	exit 1
fi

out=$(mktemp -d /tmp/portico-proxybench-bin.XXXXXX)
trap 'rm -rf "$out"' EXIT
if [[ -z ${PORTICO:-} ]]; then
	# As the Dockerfile builds the release image: a static binary, no libc mapped.
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out/portico" ./cmd/portico
	PORTICO=$out/portico
fi
go build -o "$out/proxybench" ./bench/proxy

args=(-portico "$PORTICO")
if [[ -n ${QUICK:-} ]]; then
	args+=(-rounds 1 -duration 2s)
fi
"$out/proxybench" "${args[@]}" "$@"
