#!/usr/bin/env bash
# The tail of the one-ID path. Finds the counter server's maximum rate
# (`leafraft-bench counter-server` under `leafraft-bench http`, 64 connections, as fast as answers
# come; the median of 3 runs), then at fixed rates of 50 %, 75 % and 90 % of it runs
# `leafraft-bench http --rate R` with 64 connections against the counter and against
# `/api/segment/get/{tag}` on a FOLLOWER of a 3-node cluster (release build, fsync on),
# alternating, --rounds rounds per rate, and prints p99.9 of each, the medians and their ratio
# (bar: the follower within 1.25x the counter at every rate).
# Latency at a fixed rate is corrected for coordinated omission: a request that its connection
# held back past its scheduled time is charged from that time (tools/src/bin/leafraft-bench/http.rs
# says how); the uncorrected p99.9 (from the actual send) is printed next to it.
# With --single, each round also runs the same load against a single-node `leafraft serve` (no
# peers: the same request layers, allocator and segment path, without the cluster beside it), so
# the follower's extra tail splits into its own request handling and the other nodes' share of
# the 2 cores.
# Usage: scripts/bench-tail.sh [--duration S] [--rounds R] [--connections C] [--no-build] [--single]
set -euo pipefail
cd "$(dirname "$0")/.."

duration=10
rounds=3
connections=64
build=1
single=0
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --single) single=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

[ "$build" = 1 ] && cargo build --release --quiet -p leafraft -p leafraft-tools
target_dir="${CARGO_TARGET_DIR:-./target}"
bin=$target_dir/release/leafraft
bench=$target_dir/release/leafraft-bench
# `work`, `pids` (killed on exit) and `free_port`.
source scripts/lib/processes.sh
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
wait_ready() { # wait_ready URL: until it answers 200 (30 s at most)
  for _ in $(seq 1 600); do curl -sf "$1" >/dev/null && return 0; sleep 0.05; done
  echo "$1 did not answer within 30 s" >&2; exit 1
}
metric_total() { # metric_total REGEX ADDR: sum of the node's matching series
  curl -s "$2/metrics" | awk -v re="$1" '$0 ~ re {s+=$2} END {printf "%.0f\n", s+0}'
}

counter_port=$(free_port)
"$bench" counter-server --listen "127.0.0.1:$counter_port" >/dev/null 2>&1 &
pids+=($!)
ports=("$(free_port)" "$(free_port)" "$(free_port)")
members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
for i in 1 2 3; do
  "$bin" serve --node-id "$i" --listen "127.0.0.1:${ports[$((i-1))]}" --data-dir "$work/node-$i" \
    --initial-cluster "$members" >"$work/node-$i.log" 2>&1 &
  pids+=($!)
done
for port in "${ports[@]}"; do wait_ready "127.0.0.1:$port/readyz"; done
wait_ready "127.0.0.1:$counter_port/x"
"$bin" tag create bench --step 1000 --server "http://127.0.0.1:${ports[0]}" >/dev/null
leader_id=$(curl -s "127.0.0.1:${ports[0]}/v1/cluster" | field '["leader_id"]')
follower_id=$((leader_id % 3 + 1))
follower="127.0.0.1:${ports[$((follower_id - 1))]}"
counter_url="http://127.0.0.1:$counter_port/x"
single_url=""
if [ "$single" = 1 ]; then
  single_port=$(free_port)
  "$bin" serve --listen "127.0.0.1:$single_port" --data-dir "$work/single" >"$work/single.log" 2>&1 &
  pids+=($!)
  wait_ready "127.0.0.1:$single_port/readyz"
  "$bin" tag create bench --step 1000 --server "http://127.0.0.1:$single_port" >/dev/null
  single_url="http://127.0.0.1:$single_port/api/segment/get/bench"
fi
follower_url="http://$follower/api/segment/get/bench"

load() { "$bench" http --json --concurrency "$connections" "$@"; }

echo "== machine: $(nproc) cores; leader node $leader_id, follower node $follower_id; $connections connections, ${duration} s per run"
load --duration-secs 2 --url "$counter_url" --no-check >/dev/null
maxima=()
for run in 1 2 3; do
  maxima+=("$(load --duration-secs "$duration" --url "$counter_url" --no-check | field '["requests_per_sec"]')")
done
max_rate=$(python3 -c "import statistics as s; print(round(s.median([${maxima[0]}, ${maxima[1]}, ${maxima[2]}])))")
echo "counter maximum: $max_rate req/s (median of $(printf '%.0f ' "${maxima[@]}")req/s)"

for pct in 50 75 90; do
  rate=$((max_rate * pct / 100))
  echo "== $pct % of the counter's maximum: $rate req/s, alternating, $rounds rounds"
  # Warm the follower's buffers and dynamic step at this rate.
  load --duration-secs 3 --rate "$rate" --url "$follower_url" --no-check >/dev/null
  [ -n "$single_url" ] && load --duration-secs 3 --rate "$rate" --url "$single_url" --no-check >/dev/null
  counter_p=() follower_p=() single_p=()
  for round in $(seq 1 "$rounds"); do
    base=$(load --duration-secs "$duration" --rate "$rate" --url "$counter_url" --no-check)
    claims_before=$(metric_total '^leafraft_segment_claims_all_tags_total[{]result="ok"' "$follower")
    waits_before=$(metric_total '^leafraft_segment_waits_all_tags_total' "$follower")
    lr=$(load --duration-secs "$duration" --rate "$rate" --url "$follower_url")
    claims=$(( $(metric_total '^leafraft_segment_claims_all_tags_total[{]result="ok"' "$follower") - claims_before ))
    waits=$(( $(metric_total '^leafraft_segment_waits_all_tags_total' "$follower") - waits_before ))
    counter_p+=("$(echo "$base" | field '["p999_us"]')")
    follower_p+=("$(echo "$lr" | field '["p999_us"]')")
    printf "round %s  counter p99.9 %6s µs (uncorrected %6s, late sends %s)  follower p99.9 %6s µs (uncorrected %6s, late sends %s, p99 %s µs, max %s µs, %s ok, errors %s, duplicates %s, claims %s, waits %s)\n" \
      "$round" "${counter_p[-1]}" "$(echo "$base" | field '["service_p999_us"]')" "$(echo "$base" | field '["late_sends"]')" \
      "${follower_p[-1]}" "$(echo "$lr" | field '["service_p999_us"]')" "$(echo "$lr" | field '["late_sends"]')" \
      "$(echo "$lr" | field '["p99_us"]')" "$(echo "$lr" | field '["max_us"]')" "$(echo "$lr" | field '["ok"]')" \
      "$(echo "$lr" | field '["errors_by_status"]')" "$(echo "$lr" | field '["duplicates"]')" "$claims" "$waits"
    if [ -n "$single_url" ]; then
      sr=$(load --duration-secs "$duration" --rate "$rate" --url "$single_url")
      single_p+=("$(echo "$sr" | field '["p999_us"]')")
      printf "         single node p99.9 %6s µs (uncorrected %6s, late sends %s, errors %s, duplicates %s)\n" \
        "${single_p[-1]}" "$(echo "$sr" | field '["service_p999_us"]')" "$(echo "$sr" | field '["late_sends"]')" \
        "$(echo "$sr" | field '["errors_by_status"]')" "$(echo "$sr" | field '["duplicates"]')"
    fi
  done
  python3 - "$pct" "$rate" "${counter_p[*]}" "${follower_p[*]}" "${single_p[*]:-}" <<'EOF'
import statistics, sys
pct, rate = sys.argv[1], sys.argv[2]
counter = [int(x) for x in sys.argv[3].split()]
follower = [int(x) for x in sys.argv[4].split()]
c, f = statistics.median(counter), statistics.median(follower)
ratio = f / c if c else float("inf")
print(f"{pct} % ({rate} req/s): p99.9 median counter {c/1000:.2f} ms, follower {f/1000:.2f} ms, ratio {ratio:.2f} "
      f"[{'meets' if ratio <= 1.25 else 'misses'} <= 1.25]")
single = [int(x) for x in sys.argv[5].split()] if len(sys.argv) > 5 and sys.argv[5].strip() else []
if single:
    n = statistics.median(single)
    print(f"{pct} %: single node {n/1000:.2f} ms, {n / c if c else float('inf'):.2f} of the counter "
          f"(its own request handling), follower {f / n if n else float('inf'):.2f} of the single node (the cluster beside it)")
EOF
done
