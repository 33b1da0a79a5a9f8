#!/usr/bin/env bash
# Instructions per one-ID request, repeatable on a loaded machine where wall-clock
# numbers are not: a single-node `leafraft serve` (or, with --counter, the counter server of
# scripts/bench.sh) runs under `valgrind --tool=callgrind`; after a 3 s warm-up its counts are
# zeroed, `leafraft-bench http` sends one-ID requests on 4 keep-alive connections for --duration
# seconds, and the counts are dumped: the process's instructions (Ir) over the requests answered.
# Background work (the sweep, the node's tasks) is in the total, so compare builds with the same
# duration. Needs valgrind.
# Usage: scripts/bench-callgrind.sh [--counter] [--duration S] [--path /v1/segment/bench] [--bin B] [--bench B]
set -euo pipefail
cd "$(dirname "$0")/.."
target_dir="${CARGO_TARGET_DIR:-./target}"
bin=$target_dir/release/leafraft
bench=$target_dir/release/leafraft-bench
duration=8
path=/api/segment/get/bench
counter=0
while [ $# -gt 0 ]; do
  case "$1" in
    --counter) counter=1; shift ;;
    --duration) duration=$2; shift 2 ;;
    --path) path=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
# `work`, `pids` (killed on exit) and `free_port`.
source scripts/lib/processes.sh
port=$(free_port)
out=$work/callgrind.out
if [ "$counter" = 1 ]; then
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bench" counter-server --listen "127.0.0.1:$port" >"$work/log" 2>&1 &
  pid=$!
  url="http://127.0.0.1:$port/x"
  for _ in $(seq 1 600); do curl -sf "$url" >/dev/null && break; sleep 0.1; done
else
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" serve --listen "127.0.0.1:$port" --data-dir "$work/node" >"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
  "$bin" tag create bench --step 100000 --server "http://127.0.0.1:$port" >/dev/null
  url="http://127.0.0.1:$port$path"
fi
pids+=("$pid")
"$bench" http --json --concurrency 4 --duration-secs 3 --url "$url" >/dev/null
callgrind_control -z "$pid" >/dev/null 2>&1
report=$("$bench" http --json --concurrency 4 --duration-secs "$duration" --url "$url")
callgrind_control -d "$pid" >/dev/null 2>&1
answered=$(echo "$report" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["ok"] + sum(r["errors_by_status"].values()))')
dump=$(ls "$out".* | head -1)
total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
echo "requests $answered  instructions $total  per request $(python3 -c "print(round($total / $answered))")"
