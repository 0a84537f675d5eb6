#!/usr/bin/env bash
# Portico's quickstart: builds portico, starts three echo backends on 127.0.0.1:9001-9003,
# and serves examples/quickstart/manifests on http://127.0.0.1:8080 (admin on :8090).
# Try, in another terminal:
#   curl -H 'Host: shop.localhost' http://127.0.0.1:8080/api/orders
#   curl -H 'Host: eu.shop.localhost' http://127.0.0.1:8080/
#   curl http://127.0.0.1:8080/anything      # no rule matches: the default backend answers
# Extra flags are passed to `portico run`. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/../.."

hack/build.sh bin/portico

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

bin/portico echo --listen 127.0.0.1:9001 --service web & pids+=($!)
bin/portico echo --listen 127.0.0.1:9002 --service web & pids+=($!)
bin/portico echo --listen 127.0.0.1:9003 --service api & pids+=($!)

bin/portico run --manifests examples/quickstart/manifests "$@" & pids+=($!)
wait "${pids[-1]}"
