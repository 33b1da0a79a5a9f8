#!/usr/bin/env bash
# Learners as serving replicas: what each learner costs the leader, and that a learner
# serves as fast as a voter. For 0, 2, 4 and 8 learners (fresh cluster each: 3 voters + the
# learners, release build, fsync on, processes on loopback): a fixed rate of one-ID requests on
# the two followers with small segments (dynamic step pinned, so claims keep coming); reported: the leader's CPU time (user + system, from /proc), the
# claims committed, and the claim latency from the followers' histograms (mean, and the bucket
# holding the 99th percentile). Then, on the cluster with 2 learners: the same load generator at
# full speed on one learner alone and on one follower alone, paired, 3 rounds.
# Usage: scripts/bench-learners.sh [--duration S] [--rate R]
set -euo pipefail
cd "$(dirname "$0")/.."

duration=10
rate=8000
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

cargo build --release --quiet -p leafraft -p leafraft-tools
target_dir=${CARGO_TARGET_DIR:-./target}
bin=$target_dir/release/leafraft
bench=$target_dir/release/leafraft-bench
# `work`, `pids` (killed on exit) and `free_port`.
source scripts/lib/processes.sh
wait_ready() { # wait_ready PORT
  for _ in $(seq 1 600); do curl -sf "127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.05; done
  echo "127.0.0.1:$1 not ready within 30 s" >&2; return 1
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# start_cluster LEARNERS: 3 voters and LEARNERS learners in $work/c$LEARNERS; sets ports, node_pids.
start_cluster() {
  local learners=$1 id
  ports=() node_pids=()
  for id in $(seq 1 $((3 + learners))); do ports[$id]=$(free_port); done
  local members="1=127.0.0.1:${ports[1]},2=127.0.0.1:${ports[2]},3=127.0.0.1:${ports[3]}"
  for id in $(seq 1 $((3 + learners))); do
    local join=(--initial-cluster "$members")
    [ "$id" -gt 3 ] && join=(--join "127.0.0.1:${ports[1]}" --learner)
    if [ "$id" -gt 3 ]; then wait_ready "${ports[1]}"; fi
    "$bin" serve --node-id "$id" --listen "127.0.0.1:${ports[$id]}" --data-dir "$work/c$learners-$id" \
      --segment-duration-ms 1 "${join[@]}" >"$work/c$learners-$id.log" 2>&1 &
    pids+=($!)
    node_pids[$id]=$!
    if [ "$id" -gt 3 ]; then wait_ready "${ports[$id]}"; fi
  done
  for id in 1 2 3; do wait_ready "${ports[$id]}"; done
}

claims_ok() { # claims_ok PORT...: committed claims this node proposed, summed
  local total=0 port n
  for port in "$@"; do
    n=$(curl -s "127.0.0.1:$port/metrics" | awk '/^leafraft_segment_claims_total[{].*result="ok"/ {s+=$2} END {print s+0}')
    total=$((total + n))
  done
  echo "$total"
}
histogram() { # histogram PORT...: the followers' claim histograms merged, as "bucket count" lines
  local port
  for port in "$@"; do curl -s "127.0.0.1:$port/metrics" | grep -E '^leafraft_segment_claim_duration_seconds_(bucket|sum|count)'; done
}

learner_vs_follower() { # learner_vs_follower LEARNER_PORT FOLLOWER_PORT
  local round l f lr fr
  for round in 1 2 3; do
    l=$("$bench" http --json --concurrency 8 --duration-secs 5 --url "http://127.0.0.1:$1/api/segment/get/bench")
    f=$("$bench" http --json --concurrency 8 --duration-secs 5 --url "http://127.0.0.1:$2/api/segment/get/bench")
    lr=$(echo "$l" | field '["requests_per_sec"]')
    fr=$(echo "$f" | field '["requests_per_sec"]')
    printf "round %s  learner %8.0f req/s (errors %s, duplicates %s)  follower %8.0f req/s (duplicates %s)  ratio %.2f\n" \
      "$round" "$lr" "$(echo "$l" | field '["errors_by_status"]')" "$(echo "$l" | field '["duplicates"]')" "$fr" \
      "$(echo "$f" | field '["duplicates"]')" "$(python3 -c "print($lr / $fr)")"
  done
}

echo "== leader cost per learner: $rate req/s on the two followers for ${duration}s, 3 voters + N learners ($(nproc) cores)"
printf "%-9s %12s %10s %14s %14s %16s\n" learners "leader CPU %" claims "CPU ms/claim" "mean claim µs" "p99 bucket ≤ ms"
for learners in 0 2 4 8; do
  start_cluster "$learners"
  "$bin" tag create bench --step 200 --server "http://127.0.0.1:${ports[1]}" >/dev/null
  leader=$(curl -s "127.0.0.1:${ports[1]}/v1/cluster" | field '["leader_id"]')
  followers=()
  for id in 1 2 3; do [ "$id" != "$leader" ] && followers+=("${ports[$id]}"); done
  urls="http://127.0.0.1:${followers[0]}/api/segment/get/bench,http://127.0.0.1:${followers[1]}/api/segment/get/bench"
  # Every node applies the tag before the load (the learners too), so no request meets a 404.
  for id in $(seq 1 $((3 + learners))); do
    for _ in $(seq 1 200); do curl -sf "127.0.0.1:${ports[$id]}/api/segment/get/bench" >/dev/null && break; sleep 0.05; done
  done
  before_claims=$(claims_ok "${followers[@]}")
  before_cpu=$(cpu_ticks "${node_pids[$leader]}")
  "$bench" http --json --concurrency 8 --rate "$rate" --duration-secs "$duration" --url "$urls" >"$work/load.json"
  after_cpu=$(cpu_ticks "${node_pids[$leader]}")
  after_claims=$(claims_ok "${followers[@]}")
  histogram "${followers[@]}" >"$work/hist"
  python3 - "$learners" "$((after_cpu - before_cpu))" "$(getconf CLK_TCK)" "$duration" "$((after_claims - before_claims))" "$work/hist" <<'EOF'
import sys, collections
learners, ticks, hz, secs, claims, hist = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
buckets, total, count = collections.Counter(), 0.0, 0
for line in open(hist):
    name, value = line.rsplit(" ", 1)
    if "_bucket" in name:
        le = name.split('le="')[1].split('"')[0]
        buckets[float("inf") if le == "+Inf" else float(le)] += float(value)
    elif name.endswith("_sum") or "_sum{" in name:
        total += float(value)
    elif name.endswith("_count") or "_count{" in name:
        count += int(float(value))
p99 = next((le for le in sorted(buckets) if buckets[le] >= 0.99 * count), float("nan")) if count else float("nan")
cpu_s = ticks / hz
print(f"{learners:<9} {cpu_s / secs * 100:12.1f} {claims:10d} {cpu_s * 1000 / max(claims, 1):14.2f} "
      f"{(total / count * 1e6 if count else float('nan')):14.0f} {p99 * 1000:16.1f}")
EOF
  [ "$learners" = 2 ] && learner_vs_follower "${ports[4]}" "${followers[0]}" >"$work/serving.txt"
  for pid in "${node_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
done
echo "== a learner serves like a voter (cluster with 2 learners): full speed on one node, alternating, 3 rounds"
cat "$work/serving.txt"
