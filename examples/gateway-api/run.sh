#!/usr/bin/env bash
# Gateway API without a cluster: builds portico, starts three echo backends on
# 127.0.0.1:9101-9103, and serves examples/gateway-api/manifests. The Gateway's listener
# on port 80 is served on http://127.0.0.1:10080 (port + --gateway-port-offset, 10000).
# Try, in another terminal:
#   curl -H 'Host: store.example.com' http://127.0.0.1:10080/
#   curl -H 'Host: store.example.com' -H 'x-canary: always' http://127.0.0.1:10080/
#   curl -i -H 'Host: search.example.com' http://127.0.0.1:10080/v1/items
#   bin/portico check examples/gateway-api/manifests
# Extra flags are passed to `portico run`. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/../.."

hack/build.sh bin/portico

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

bin/portico echo --listen 127.0.0.1:9101 --service store --namespace shop & pids+=($!)
bin/portico echo --listen 127.0.0.1:9102 --service store-canary --namespace shop & pids+=($!)
bin/portico echo --listen 127.0.0.1:9103 --service search --namespace search & pids+=($!)

bin/portico run --manifests examples/gateway-api/manifests "$@" & pids+=($!)
wait "${pids[-1]}"
