#!/usr/bin/env bash
# The write-path scenarios (batched claims and many namespaces), each on a fresh 3-node cluster of
# release `leafraft serve` processes (fsync on, loopback):
#   3. time-sequence namespaces (`leafraft-bench namespaces`): N namespaces, each asked for one ID
#      per second on every node for S seconds, at every N of --namespaces (default 1,000 and
#      10,000, so one sees whether the committed entries per second grow with the namespaces).
#      Bar: every request answered, p99 <= 5 ms, entries/s not growing with N.
#      --ids-per-second R asks each namespace R times a second instead: `--namespaces 1
#      --ids-per-second 10000` sends the requests of 10,000 namespaces with almost no claims, the
#      floor the request path alone sets on this machine.
#      --count K asks K IDs per request (the list path) and ids-per-second / K requests:
#      `--namespaces 100 --ids-per-second 6700 --count 100` is 100 namespaces at about 20,000 IDs
#      a second each over the three nodes; the report says how much of a second's sequence space
#      the busiest (namespace, second) used and how many answers were SECOND_EXHAUSTED.
#   4. first IDs (`leafraft-bench first-ids`): N imported tags, the first ID of each asked once,
#      64 in flight spread round robin over the nodes. Bar: all answered within 30 s. Then the
#      nodes stop gracefully, giving back every buffer's tail: the stop's time and the tails given
#      back (from the nodes' logs) are reported.
# Each run reports the committed Raft entries per second (the leader's commit index, sampled once
# a second); a summary follows at the end. With --tail, scripts/bench-tail.sh (acceptance 6) runs
# after them.
# Usage: scripts/bench-batching.sh [--namespaces N[,N...]] [--ids-per-second R] [--count K] [--tags N]
#        [--duration S] [--with-floor] [--tail]
#   e.g. a quick check: scripts/bench-batching.sh --namespaces 30,300 --duration 10 --tags 3000
#   --namespaces '' or --tags 0 leaves that scenario out.
#   --with-floor runs, before each namespaces row, its floor on a fresh cluster: one namespace asked
#      as often as all of the row's together (`--namespaces 1 --ids-per-second N x R`), so the row
#      and the floor it is compared with share the run's hour; the summary gives both.
set -euo pipefail
cd "$(dirname "$0")/.."

namespace_counts=1000,10000
ids_per_second=1
count=1
tags=100000
duration=60
tail_too=0
with_floor=0
while [ $# -gt 0 ]; do
  case "$1" in
    --namespaces) namespace_counts=$2; shift 2 ;;
    --ids-per-second) ids_per_second=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --tags) tags=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --tail) tail_too=1; shift ;;
    --with-floor) with_floor=1; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

cargo build --release --quiet -p leafraft -p leafraft-tools
target_dir="${CARGO_TARGET_DIR:-./target}"
bin=$target_dir/release/leafraft
bench=$target_dir/release/leafraft-bench
# `work`, `pids` (killed on exit) and `free_port`.
source scripts/lib/processes.sh

# start_cluster NAME: three nodes on free loopback ports, ready; their addresses land in `nodes`
# (comma separated). Not called in $(...): a subshell would keep the PIDs from the cleanup trap.
start_cluster() {
  local name=$1 ports members
  ports=("$(free_port)" "$(free_port)" "$(free_port)")
  members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
  cluster_pids=()
  for i in 1 2 3; do
    "$bin" serve --node-id "$i" --listen "127.0.0.1:${ports[$((i-1))]}" --data-dir "$work/$name-$i" \
      --initial-cluster "$members" >"$work/$name-$i.log" 2>&1 &
    pids+=($!)
    cluster_pids+=($!)
  done
  for port in "${ports[@]}"; do
    local ready=0
    for _ in $(seq 1 600); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && { ready=1; break; }; sleep 0.05; done
    [ "$ready" = 1 ] || { echo "node on port $port not ready within 30 s" >&2; exit 1; }
  done
  nodes="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]},127.0.0.1:${ports[2]}"
}

# nodes_cpu_secs: the CPU seconds (user + system) the nodes start_cluster started last have used.
nodes_cpu_secs() {
  local ticks=0 pid fields
  for pid in "${cluster_pids[@]}"; do
    # Fields 14 and 15 of /proc/PID/stat, counted after the command name's closing parenthesis.
    fields=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || continue
    ticks=$((ticks + $(awk '{print $12 + $13}' <<<"$fields")))
  done
  python3 -c "print(f'{$ticks / $(getconf CLK_TCK):.1f}')"
}

# stop_cluster NAME: stops the nodes start_cluster started last and frees their disk.
stop_cluster() {
  local name=$1
  for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work/$name-"[123]
}

echo "== machine: $(nproc) cores; $(git rev-parse --short HEAD 2>/dev/null || echo '?'): $("$bin" --version)"
results=()

counts=()
IFS=, read -r -a counts <<<"$namespace_counts"
# namespaces_row N R: N namespaces, each asked R times a second on each node.
namespaces_row() {
  local n=$1 ids_per_second=$2
  echo "== 3. $n time-sequence namespaces, $ids_per_second ID(s) per namespace per second on each of 3 nodes, $count per request, ${duration} s (fresh cluster)"
  start_cluster "ns${n}x${ids_per_second}"
  status=0
  cpu_before=$(nodes_cpu_secs)
  "$bench" namespaces --nodes "$nodes" --namespaces "$n" --ids-per-second "$ids_per_second" --count "$count" --duration "$duration" --json >"$work/ns${n}x${ids_per_second}.json" || status=$?
  cpu_after=$(nodes_cpu_secs)
  stop_cluster "ns${n}x${ids_per_second}"
  [ -s "$work/ns${n}x${ids_per_second}.json" ] || { echo "the namespaces run at $n printed no report (exit $status)" >&2; exit 1; }
  python3 - "$work/ns${n}x${ids_per_second}.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
l, s, c = r["latency"], r["settled_latency"], r["commits"]
print(f"created {r['namespaces']} namespaces in {r['create_secs']:.1f} s")
print(f"requests {r['due']} due, {r['sent']} sent, {r['answered']} answered, {r['failed']} failed (run {r['run_secs']:.1f} s)")
for failure, n in r["failures"]:
    print(f"  failed: {n} x {failure}")
q = r["sequences"]
print(f"sequences: at most {q['most_used']} of {q['limit']} in any (namespace, second) ({q['most_used']*100/max(q['limit'],1):.1f} %), "
      f"over {q['seconds']} of them; SECOND_EXHAUSTED answers {q['second_exhausted']}")
print(f"latency all:     p50 {l['p50_us']/1000:.2f} ms  p99 {l['p99_us']/1000:.2f} ms  p99.9 {l['p999_us']/1000:.2f} ms  max {l['max_us']/1000:.2f} ms")
print(f"latency settled: p50 {s['p50_us']/1000:.2f} ms  p99 {s['p99_us']/1000:.2f} ms  p99.9 {s['p999_us']/1000:.2f} ms  max {s['max_us']/1000:.2f} ms (due after 5 s)")
print(f"committed entries {c['entries']} in {c['secs']:.1f} s = {c['per_sec']:.0f}/s (busiest second {c['busiest_per_sec']:.0f}/s); "
      f"claims {r['claims']:.0f}, waits {r['waits']:.0f}; duplicates {r['duplicates']}")
print(f"claims: {r['claims'] * 100 / max(r['answered'], 1):.2f} % of answers over the run, "
      f"{r['settled_claims'] * 100 / max(r['settled_answered'], 1):.2f} % after the first 5 s "
      f"({r['settled_claims']:.0f} of {r['settled_answered']} answers)")
# Where the tail is: each second (by when its requests were due) with over 1 % of them above 5 ms.
slow = [f"{i}s {x['over_5ms']*100/x['sent']:.0f}%/{x['max_us']/1000:.0f}ms"
        for i, x in enumerate(r.get("seconds", [])) if x["sent"] and x["over_5ms"] * 100 > x["sent"]]
print("seconds with > 1 % over 5 ms (share / max): " + (", ".join(slow) or "none"))
EOF
  echo "CPU of the three nodes during the run: $(python3 -c "print(f'{$cpu_after - $cpu_before:.1f}')") s"
  results+=("ns:$n:$work/ns${n}x${ids_per_second}.json")
}
for n in ${counts[@]+"${counts[@]}"}; do
  if [ "$with_floor" = 1 ] && [ "$n" != 1 ]; then namespaces_row 1 $((n * ids_per_second)); fi
  namespaces_row "$n" "$ids_per_second"
done

first_ids_section() {
echo "== 4. the first ID of each of $tags tags, 64 in flight round robin over 3 nodes (fresh cluster)"
start_cluster first
status=0
"$bench" first-ids --nodes "$nodes" --tags "$tags" --concurrency 64 --json >"$work/first.json" || status=$?
# The graceful stop that follows gives every buffer's tail back (the release batches).
stop_began=$(date +%s.%N)
for pid in "${cluster_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
for pid in "${cluster_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
stop_secs=$(python3 -c "print(f'{$(date +%s.%N) - $stop_began:.2f}')")
given_back=$(cat "$work"/first-[123].log | python3 -c '
import re, sys
tails = applied = entries = 0
for line in sys.stdin:
    if "segment tails released" in line:
        entries += 1
        tails += int(re.search(r"tails=(\d+)", line).group(1))
        applied += int(re.search(r"applied=(\d+)", line).group(1))
    elif "segment tail released" in line:
        entries += 1
        tails += 1
        applied += "applied=true" in line
print(f"{tails} tails released in {entries} entries ({applied} applied)")')
stop_cluster first
[ -s "$work/first.json" ] || { echo "the first-ids run printed no report (exit $status)" >&2; exit 1; }
python3 - "$work/first.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
l, c = r["latency"], r["commits"]
print(f"imported {r['tags']} tags in {r['import_secs']:.1f} s")
print(f"done in {r['total_secs']:.1f} s: {r['sent']} asked, {r['answered']} answered, {r['failed']} failed")
for failure, n in r["failures"]:
    print(f"  failed: {n} x {failure}")
print(f"latency p50 {l['p50_us']/1000:.2f} ms  p99 {l['p99_us']/1000:.2f} ms  p99.9 {l['p999_us']/1000:.2f} ms  max {l['max_us']/1000:.2f} ms")
print(f"committed entries {c['entries']} in {c['secs']:.1f} s = {c['per_sec']:.0f}/s (busiest second {c['busiest_per_sec']:.0f}/s); "
      f"segment claims {r['claims']:.0f}; duplicates {r['duplicates']}, outside their tag's range {r['out_of_range']}")
EOF
echo "then a graceful stop of the 3 nodes: ${stop_secs} s; $given_back"
results+=("first:$tags:$work/first.json")
}
[ "$tags" -gt 0 ] && first_ids_section

echo "== summary"
python3 - "${results[@]}" <<'EOF'
import json, sys
for arg in sys.argv[1:]:
    kind, n, path = arg.split(":", 2)
    r = json.load(open(path))
    c = r["commits"]
    if kind == "ns":
        s = r["settled_latency"]
        ok = r["failed"] == 0 and r["latency"]["p99_us"] <= 5000
        rate = f" x {r['ids_per_second']}/s" if r.get("ids_per_second", 1) != 1 else ""
        claims = (f"{r['claims'] * 100 / max(r['answered'], 1):.1f} % (after 5 s: "
                  f"{r.get('settled_claims', 0) * 100 / max(r.get('settled_answered', 0), 1):.2f} %)")
        print(f"namespaces {int(n):>7}{rate}: answered {r['answered']}/{r['due']}, p99 {r['latency']['p99_us']/1000:.2f} ms "
              f"(settled {s['p99_us']/1000:.2f} ms), {c['per_sec']:.0f} entries/s, claims {claims} of answers  "
              f"[{'meets' if ok else 'misses'} 'every request answered, p99 <= 5 ms']")
    else:
        ok = r["failed"] == 0 and r["total_secs"] <= 30
        print(f"first IDs  {int(n):>7}: answered {r['answered']}/{r['tags']} in {r['total_secs']:.1f} s, "
              f"{c['per_sec']:.0f} entries/s  [{'meets' if ok else 'misses'} 'all answered within 30 s']")
EOF

if [ "$tail_too" = 1 ]; then
  trap - EXIT
  cleanup
  exec scripts/bench-tail.sh
fi
