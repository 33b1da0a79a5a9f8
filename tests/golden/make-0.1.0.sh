#!/usr/bin/env bash
# Makes tests/golden/0.1.0/node1: a one-node data directory written by the 0.1.0 binary (the
# baseline, releases/0.1.0), which `tests/e2e/upgrade.rs` opens with the binary under test. Run
# once, when the directory is (re)made; the directory is checked in, the script says how.
#
#   scripts/upgrade-test.sh --build-only && tests/golden/make-0.1.0.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
commit="$(tr -d '[:space:]' < releases/0.1.0)"
bin="target/upgrade-baseline/leafraft-0.1.0-${commit:0:12}"
dir=tests/golden/0.1.0/node1
port=$((20000 + RANDOM % 20000))
url="http://127.0.0.1:$port"
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
"$bin" serve --node-id 1 --data-dir "$dir" --listen "127.0.0.1:$port" >/tmp/golden-0.1.0.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf "$url/readyz" >/dev/null && break; sleep 0.1; done
post() { curl -sf -X POST -H 'content-type: application/json' -d "$2" "$url$1"; echo; }
post /v1/tags '{"tag":"golden-orders","step":10,"description":"orders of the baseline"}'
post /v1/tags '{"tag":"golden-coupons","max_id":5000,"step":100}'
post /v1/timeseq '{"namespace":"golden-ts"}'
# The first request of each kind may find nothing loaded yet (503): ask again.
get() { for _ in $(seq 50); do curl -sf "$url$1" && echo && return; sleep 0.1; done; echo "no answer: $1" >&2; exit 1; }
# Segment IDs up to 30 (the test's GOLDEN_SERVED_MAX), a snowflake worker, time-sequence IDs.
get "/v1/segment/golden-orders?count=10"
get "/v1/segment/golden-orders?count=20"
get "/v1/snowflake?count=3"
get "/v1/timeseq/golden-ts?shard=1&count=3"
kill -TERM $pid
wait $pid
trap - EXIT
du -sh "$dir"
