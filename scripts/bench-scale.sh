#!/usr/bin/env bash
# Many tags: a 3-node cluster (release build, fsync on) gets N tags (default 100,000)
# through `leafraft tag import`, then prints what a large deployment meets: the import time,
# resident memory per node and per tag, `GET /v1/tags?limit=1000` latency and size, the status
# page and `/metrics` sizes, a follower's restart-to-ready time, and a new learner's catch-up.
# Usage: scripts/bench-scale.sh [--tags N]
set -euo pipefail
cd "$(dirname "$0")/.."

tags=100000
[ "${1:-}" = "--tags" ] && tags=$2

cargo build --release --quiet -p leafraft
bin=${CARGO_TARGET_DIR:-./target}/release/leafraft
# `work`, `pids` (killed on exit) and `free_port`.
source scripts/lib/processes.sh
now() { date +%s.%N; }
since() { python3 -c "print('%.2f' % ($(now) - $1))"; }
rss_kb() { ps -o rss= -p "$1" | tr -d ' '; }
wait_ready() { # wait_ready PORT: until /readyz answers 200 (30 s at most)
  for _ in $(seq 1 600); do curl -sf "127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.05; done
  echo "127.0.0.1:$1 not ready within 30 s" >&2; return 1
}

ports=("$(free_port)" "$(free_port)" "$(free_port)" "$(free_port)")
members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
start() { # start ID [flags...]
  local id=$1; shift
  "$bin" serve --node-id "$id" --listen "127.0.0.1:${ports[$((id-1))]}" --data-dir "$work/node-$id" "$@" \
    >>"$work/node-$id.log" 2>&1 &
  pids[$id]=$!
}
for id in 1 2 3; do start "$id" --initial-cluster "$members"; done
for id in 1 2 3; do wait_ready "${ports[$((id-1))]}"; done
server="http://127.0.0.1:${ports[0]}"
for id in 1 2 3; do rss_before[$id]=$(rss_kb "${pids[$id]}"); done

python3 - "$tags" >"$work/tags.tsv" <<'EOF'
import sys
print("biz_tag\tmax_id\tstep\tdescription")
for i in range(int(sys.argv[1])):
    print(f"biz-{i:06d}\t{i + 1}\t1000\tNULL")
EOF
echo "== $tags tags on a 3-node cluster ($(nproc) cores)"
t0=$(now)
"$bin" tag import "$work/tags.tsv" --server "$server" >"$work/import.out"
echo "import (leafraft tag import, batches of up to 500 tags per Raft entry): $(since "$t0") s (bar < 10 s); $(tail -1 "$work/import.out")"

for id in 1 2 3; do
  after=$(rss_kb "${pids[$id]}")
  echo "node $id resident memory: ${rss_before[$id]} KB before, $after KB after: $(( (after - rss_before[$id]) * 1024 / tags )) bytes per tag"
done

follower=${ports[1]}
curl -s -o /dev/null "127.0.0.1:$follower/v1/tags?limit=1000"
curl -s -o /dev/null -w "GET /v1/tags?limit=1000: %{time_total} s, %{size_download} bytes (bar < 50 ms)\n" "127.0.0.1:$follower/v1/tags?limit=1000"
curl -s -o /dev/null -w "GET /v1/tags?limit=1000&after=biz-050000: %{time_total} s\n" "127.0.0.1:$follower/v1/tags?limit=1000&after=biz-050000"
# Serve a few tags so their buffers and per-tag series exist.
for i in $(seq 0 99); do curl -s -o /dev/null "127.0.0.1:$follower/api/segment/get/biz-$(printf %06d "$i")"; done
curl -s -o /dev/null -w "status page: %{size_download} bytes, %{time_total} s (bar < 2 MiB)\n" "127.0.0.1:$follower/"
curl -s -o /dev/null -w "/metrics: %{size_download} bytes, %{time_total} s (bar < 1 MiB)\n" "127.0.0.1:$follower/metrics"

kill -9 "${pids[2]}"; wait "${pids[2]}" 2>/dev/null || true
t0=$(now)
start 2
wait_ready "$follower"
echo "restart to ready (node 2 killed with SIGKILL, restarted on its disk): $(since "$t0") s (bar < 2 s)"

# Pad the log past the purge point (a snapshot every 1,125 to 1,375 entries on nodes 1-3, 1,000 kept
# behind it), so the learner cannot replay from the first entry and must install a snapshot of all
# the tags.
t0=$(now)
seq 1 2400 | xargs -P 16 -I{} curl -s -o /dev/null -X POST -H 'content-type: application/json' \
  -d '{"tag":"pad-{}","step":1000}' "$server/v1/tags"
echo "2,400 more single writes (tag creates, 16 at a time) to pass the purge point: $(since "$t0") s"

t0=$(now)
start 4 --join "127.0.0.1:${ports[0]}" --learner
wait_ready "${ports[3]}"
echo "a new learner joined and caught up (log replay or snapshot install): $(since "$t0") s (bar < 2 s)"
grep -o 'snapshot installed.*' "$work/node-4.log" | head -1 | sed 's/^/learner: /' || true
curl -s "$server/metrics" | grep -E '^leafraft_raft_(last_log_index|snapshot)' | head -5 || true
