#!/usr/bin/env bash
# Leaks: resident memory and open file descriptors of every node over a long load run
# with leader kills. Three voters and a learner (release build, fsync on) serve segment,
# snowflake and time-sequence IDs at a fixed rate to three load generators (each checks its own
# kind for duplicates); every --kill-every seconds the leader is killed with SIGKILL and restarted
# on its disk. Every 30 s each node's RSS and open descriptors are sampled. The learner never
# leads, so it is never killed and lives the whole run: its figures are the long-run ones; a voter
# is judged over each incarnation that lived at least 10 minutes.
# A process passes when its RSS and descriptors at the end of its life are within 10 % of their
# values 5 minutes into it (after warm-up).
# Usage: scripts/soak.sh [--minutes M] [--kill-every S] [--rate R] [--interval S (between samples)]
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=30
kill_every=300
rate=3000
interval=30
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --kill-every) kill_every=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

cargo build --release --quiet -p leafraft -p leafraft-tools
target_dir=${CARGO_TARGET_DIR:-./target}
bin=$target_dir/release/leafraft
bench=$target_dir/release/leafraft-bench
work=$(mktemp -d)
pids=()
loads=()
cleanup() {
  for pid in "${loads[@]}" "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # wait_ready PORT: until /readyz answers 200 (60 s at most)
  for _ in $(seq 1 1200); do curl -sf "127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.05; done
  echo "127.0.0.1:$1 not ready within 60 s" >&2; return 1
}

ports=("$(free_port)" "$(free_port)" "$(free_port)" "$(free_port)")
members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
start() { # start ID [flags...]
  local id=$1; shift
  "$bin" serve --node-id "$id" --listen "127.0.0.1:${ports[$((id-1))]}" --data-dir "$work/node-$id" "$@" \
    >>"$work/node-$id.log" 2>&1 &
  pids[$id]=$!
  born[$id]=$SECONDS
}
for id in 1 2 3; do start "$id" --initial-cluster "$members"; done
for id in 1 2 3; do wait_ready "${ports[$((id-1))]}"; done
start 4 --join "127.0.0.1:${ports[0]}" --learner
wait_ready "${ports[3]}"
server="http://127.0.0.1:${ports[0]}"
"$bin" tag create soak --server "$server" >/dev/null
"$bin" timeseq create soak --server "$server" >/dev/null
for port in "${ports[@]}"; do
  for _ in $(seq 1 200); do
    curl -sf "127.0.0.1:$port/api/segment/get/soak" >/dev/null && curl -sf "127.0.0.1:$port/v1/timeseq/soak?shard=1" >/dev/null && break
    sleep 0.05
  done
done

urls() { # urls PATH -> the path on every node, comma separated
  local out=() port
  for port in "${ports[@]}"; do out+=("http://127.0.0.1:$port$1"); done
  (IFS=,; echo "${out[*]}")
}
secs=$((minutes * 60))
third=$((rate / 3))
for kind in segment snowflake timeseq; do
  case $kind in
    segment) path=/api/segment/get/soak ;;
    snowflake) path=/api/snowflake/get/soak ;;
    timeseq) path="/api/timeseq/get/soak?shard=1" ;;
  esac
  "$bench" http --json --concurrency 4 --rate "$third" --duration-secs "$secs" --url "$(urls "$path")" \
    >"$work/load-$kind.json" 2>"$work/load-$kind.err" &
  loads+=($!)
done

# Asked of the learner: it is never killed.
leader() { curl -sf "http://127.0.0.1:${ports[3]}/v1/cluster" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("leader_id") or "")' 2>/dev/null || true; }
# RSS is the sum of anonymous memory (the heap, stacks: what a leak grows) and file pages mapped
# in (the binary's code and data, faulted in as code paths run for the first time, shared and
# reclaimable); both are recorded to tell the two apart.
# A node's footprint also steps up when it becomes leader (a replication stream, connection and
# buffers per peer), so each sample records whether the node led then.
sample() { # appends "elapsed id pid age rss_kb fds anon_kb file_kb led" per node
  local id pid rss fds anon file current
  current=$(leader)
  for id in 1 2 3 4; do
    pid=${pids[$id]}
    rss="" anon="" file=""
    read -r rss anon file < <(awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} /^RssFile:/ {f = $2}
      END {if (r != "") print r, a, f}' "/proc/$pid/status" 2>/dev/null) || true
    fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l) || fds=""
    [ -n "$rss" ] && [ -n "$anon" ] && [ -n "$file" ] &&
      echo "$SECONDS $id $pid $((SECONDS - born[$id])) $rss $fds $anon $file $([ "$current" = "$id" ] && echo 1 || echo 0)" \
        >>"$work/samples"
  done
}

echo "== soak: $minutes min, 3 voters + 1 learner, $rate req/s over segment, snowflake and time-sequence, leader killed every ${kill_every}s ($(nproc) cores)"
began=$SECONDS
next_kill=$((began + kill_every))
kills=0
while [ $((SECONDS - began)) -lt "$secs" ]; do
  sample
  if [ "$SECONDS" -ge "$next_kill" ]; then
    l=$(leader)
    if [ -n "$l" ] && [ "$l" != 4 ]; then
      kill -9 "${pids[$l]}"; wait "${pids[$l]}" 2>/dev/null || true
      # Restart only once another voter leads: a leader restarted at once comes back as leader
      # of its own committed vote, and no election would have happened.
      for _ in $(seq 1 100); do
        nl=$(leader)
        [ -n "$nl" ] && [ "$nl" != "$l" ] && break
        sleep 0.1
      done
      start "$l"
      wait_ready "${ports[$((l-1))]}" || true
      kills=$((kills + 1))
      echo "$((SECONDS - began)) s: killed leader node $l with SIGKILL; node ${nl:-?} leads; restarted node $l"
    fi
    next_kill=$((SECONDS + kill_every))
  fi
  sleep "$interval"
done
sample
for pid in "${loads[@]}"; do wait "$pid" || true; done

echo "== load ($kills leader kills)"
for kind in segment snowflake timeseq; do
  python3 - "$work/load-$kind.json" "$kind" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:9} {r['ok']:>9} ok  errors {r['errors_by_status']} transport {r['transport_errors']}  duplicates {r['duplicates']}  p99 {r['p99_us']} µs")
EOF
done
echo "== memory and descriptors per process (5 min into its life -> end of its life)"
python3 - "$work/samples" <<'EOF'
import sys, collections
lives = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, node, pid, age, rss, fds, anon, file, led = map(int, line.split())
    lives[(node, pid)].append((age, rss, fds, anon, file, led))
failed = False
judged = 0
for (node, pid), samples in sorted(lives.items()):
    span = samples[-1][0]
    role = "learner" if node == 4 else "voter"
    if span < 600:
        print(f"node {node} ({role}, pid {pid}): lived {span} s, too short to judge")
        continue
    warm = next(s for s in samples if s[0] >= 300)
    end = samples[-1]
    rss_growth = (end[1] - warm[1]) / warm[1] * 100
    fds_growth = (end[2] - warm[2]) / max(warm[2], 1) * 100
    peak = max(s[1] for s in samples)
    every5 = [s for s in samples if s[0] % 300 < 30]
    series = " ".join(f"{s[1] / 1024:.1f}{'L' if s[5] else ''}" for s in every5)
    anon_series = " ".join(f"{s[3] / 1024:.1f}{'L' if s[5] else ''}" for s in every5)
    file_series = " ".join(f"{s[4] / 1024:.1f}" for s in every5)
    ok = rss_growth <= 10 and fds_growth <= 10
    judged += 1
    failed |= not ok
    print(f"node {node} ({role}, pid {pid}): {span} s; RSS {warm[1]} -> {end[1]} KB ({rss_growth:+.1f} %, peak {peak} KB); "
          f"fds {warm[2]} -> {end[2]} ({fds_growth:+.1f} %) {'ok' if ok else 'GROWS'}\n    RSS every 5 min (MB; L: leading then): {series}\n"
          f"      of it anonymous: {anon_series}\n      of it file pages: {file_series}")
if judged == 0:
    print("FAIL: no process lived 10 minutes; run longer (--minutes)")
    sys.exit(1)
print("FAIL: a process grew by more than 10 %" if failed else f"PASS: the {judged} processes judged stayed within 10 %")
sys.exit(1 if failed else 0)
EOF
