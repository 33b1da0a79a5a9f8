#!/usr/bin/env bash
# The speed bars of `docs/bars.md` for segment IDs, each measured against a baseline in the same run:
#   1. one ID per request (Leaf's path, 3-node cluster, keep-alive) vs a trivial axum counter
#      server under the same load generator: requests/s and the ratio (bar >= 0.8);
#   2. latency at half of leafraft's peak rate: p50/p99/p99.9 (bar p99.9 <= 1 ms);
#   3. batches: count=1000 as a list (bar >= 10 M IDs/s) and as ranges (bar >= 30 M IDs/s);
#   4. segment switches with a small step: the slowest request over >= 1000 switches (bar <= 5 ms);
#   5. one snowflake ID per request (Leaf's path) vs the same counter baseline (bar >= 0.8);
#   6. a monotonic tag (served by the leader, real-time order): calls/s and p50/p99 at 1, 16 and 64
#      callers for count=1 and count=1000, next to the counter baseline at the same concurrency;
#      then count=1 through a follower against the leader (bar >= 0.8, real-time order checked on
#      each run's recorded history), and /ranges?count=10000 at the leader (bar >= 200 M IDs/s);
#   7. time-sequence IDs: one ID per request (Leaf-style path) vs the counter baseline (bar >= 0.8),
#      and one namespace's IDs/s through count=1000 requests over the three nodes against the
#      layout's 524,288 per second (bar >= 95 %). (In process: `cargo bench --bench timeseq`.)
#   1b. one ID per request on a FOLLOWER of a 3-node cluster, 64 connections: this build
#      against the counter AND against the previous release's binary (releases/0.1.0, built once
#      by scripts/lib/build-commit.sh) in the same run, 5 alternating rounds, medians of the
#      per-round ratios (bars >= 0.9x the counter, >= 1.0x the release);
#   2b. the tail on a single node, pinned: the load generator on core 0, the server on
#      core 1 (`taskset`), p99.9 at 50/75/90 % of the pinned counter's maximum rate
#      (`leafraft-bench http --rate`, corrected for coordinated omission like wrk2), counter and
#      single node alternating, 3 rounds (bar: within 1.25x the counter's p99.9);
#   8. scrambled IDs: a scrambled tag against a plain one on the same cluster, alternating, 3
#      rounds: one ID per request on Leaf's path (bar >= 0.95x the plain tag's requests/s) and
#      count=1000 lists (bar >= 0.8x its IDs/s), for the default 63-bit space (19-digit IDs,
#      twice the plain tag's bytes) and a 32-bit one (10 digits, about the plain tag's);
#   --tls: only the TLS bar instead: one ID per request over TLS (keep-alive) on a 3-node cluster
#      with TLS and mutual TLS between the nodes, vs the same counter server behind the same TLS
#      stack (leafraft's own listener and rustls configuration), alternating, 3 rounds.
# Each paired ratio also prints the ceiling: three counter processes under the same load against
# the one-process baseline (on 2 cores, three processes of anything lose ~20 % to switching).
# Usage: scripts/bench.sh [--duration S] [--concurrency C] [--only-monotonic | --only-monotonic-follower | --only-lease | --only-single | --only-one-id | --only-timeseq | --only-scramble | --tls] [--binary PATH]
#   --only-scramble: section 8 only.
#   --only-one-id: sections 1b and 2b only.
#   --only-lease: section 6d only (this build's monotonic confirmation vs the lease of dcd6af4).
#   --only-monotonic-follower: section 6's follower ratio and ranges only (6b, 6c).
#   --only-single: sections 1 and 5 (the paired single-ID ratios) only.
#   --only-timeseq: section 7 only.
#   --binary PATH: the nodes run PATH instead of this build's leafraft (for example an earlier
#     commit's, from scripts/lib/build-commit.sh), so two builds' ratios can be compared in runs
#     alternated by hand: e.g. `--only-single` with and without `--binary` of the commit before.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=10
concurrency=16
switch_secs=15
only_monotonic=0
# The last commit with the leader lease (the fence replaced it): section 6d measures against it.
lease_commit=dcd6af4c66a13e2cbf5ca12ce1b175c9404cb111
only_single=0
only_one_id=0
# The previous release, which section 1b measures this build against.
release=0.1.0
only_tls=0
only_timeseq=0
only_scramble=0
binary=
while [ $# -gt 0 ]; do
  case "$1" in
    --only-monotonic) only_monotonic=1; shift ;;
    --only-monotonic-follower) only_monotonic=2; shift ;;
    --only-lease) only_monotonic=3; shift ;;
    --only-single) only_single=1; shift ;;
    --only-one-id) only_one_id=1; shift ;;
    --tls) only_tls=1; shift ;;
    --only-timeseq) only_timeseq=1; shift ;;
    --only-scramble) only_scramble=1; shift ;;
    --duration) duration=$2; shift 2 ;;
    --concurrency) concurrency=$2; shift 2 ;;
    --switch-secs) switch_secs=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

cargo build --release --quiet -p leafraft -p leafraft-tools
target_dir="${CARGO_TARGET_DIR:-./target}"
bin=${binary:-$target_dir/release/leafraft}
bench=$target_dir/release/leafraft-bench
certs=$target_dir/release/leafraft-certs
# `work`, `pids` (killed on exit) and `free_port`.
source scripts/lib/processes.sh
field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# start_cluster NAME [extra serve flags...]: three nodes; their addresses land in `cluster`.
# Not called in $(...): a subshell would keep the PIDs from the cleanup trap.
start_cluster() {
  local name=$1; shift
  local ports=("$(free_port)" "$(free_port)" "$(free_port)")
  local members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
  for i in 1 2 3; do
    "$bin" serve --node-id "$i" --listen "127.0.0.1:${ports[$((i-1))]}" --data-dir "$work/$name-$i" \
      --initial-cluster "$members" "$@" >"$work/$name-$i.log" 2>&1 &
    pids+=($!)
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 1 200); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
  done
  cluster=("127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}")
}

# follower_of ADDR: the address of a follower of the cluster in `cluster` that ADDR belongs to.
follower_of() {
  local id
  id=$(curl -s "$1/v1/cluster" | field '["leader_id"]')
  echo "${cluster[$((id % 3))]}"
}

# 1b. One ID per request on a follower: this build, the previous release and the counter
# under the same load (64 keep-alive connections to one process, every ID checked), alternating,
# 5 rounds; the ratios are medians of the per-round ratios.
one_id_section() {
  local release_bin ours theirs counter_url ratios=() release_ratios=() round
  release_bin=$(scripts/lib/build-commit.sh "$(tr -d '[:space:]' < "releases/$release")")
  cluster=("${nodes[@]}")
  ours=$(follower_of "${nodes[0]}")
  local first=${#pids[@]}
  bin=$release_bin start_cluster release
  "$release_bin" tag create bench --step 1000 --server "http://${cluster[0]}" >/dev/null
  theirs=$(follower_of "${cluster[0]}")
  counter_url="http://127.0.0.1:$counter_port/x"
  one() { "$bench" http --json --concurrency 64 --duration-secs "$duration" --url "$1"; }
  for url in "$counter_url" "http://$ours/api/segment/get/bench" "http://$theirs/api/segment/get/bench"; do
    "$bench" http --json --concurrency 64 --duration-secs 2 --url "$url" >/dev/null
  done
  echo "== 1b. one ID per request on a follower, 64 connections: this build vs the counter and vs release $release (${release_bin##*/}), alternating, 5 rounds, ${duration}s per run"
  for round in 1 2 3 4 5; do
    local base this that base_rps this_rps that_rps
    base=$(one "$counter_url")
    this=$(one "http://$ours/api/segment/get/bench")
    that=$(one "http://$theirs/api/segment/get/bench")
    base_rps=$(echo "$base" | field '["requests_per_sec"]')
    this_rps=$(echo "$this" | field '["requests_per_sec"]')
    that_rps=$(echo "$that" | field '["requests_per_sec"]')
    printf "round %s  counter %8.0f req/s (p99 %s µs)  this build %8.0f req/s (p99 %s µs, errors %s, duplicates %s)  %s %8.0f req/s (p99 %s µs, errors %s)\n" \
      "$round" "$base_rps" "$(echo "$base" | field '["p99_us"]')" "$this_rps" "$(echo "$this" | field '["p99_us"]')" \
      "$(echo "$this" | field '["errors_by_status"]')" "$(echo "$this" | field '["duplicates"]')" "$release" "$that_rps" \
      "$(echo "$that" | field '["p99_us"]')" "$(echo "$that" | field '["errors_by_status"]')"
    ratios+=("$(python3 -c "print($this_rps / $base_rps)")")
    release_ratios+=("$(python3 -c "print($this_rps / $that_rps)")")
  done
  python3 - "$release" "${ratios[*]}" "${release_ratios[*]}" <<'PY'
import statistics as s, sys
release, counter, previous = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
runs = lambda r: ", ".join("%.2f" % x for x in r)
print("this / counter      median %.2f (runs %s) (bar >= 0.9)" % (s.median(counter), runs(counter)))
print("this / release %-5s median %.2f (runs %s) (bar >= 1.0)" % (release, s.median(previous), runs(previous)))
PY
  cluster=("${nodes[@]}")
  # The release's cluster stops here, so that it takes no share of the cores from later sections.
  for pid in "${pids[@]:$first}"; do kill "$pid" 2>/dev/null || true; done
}

# 2b. The one-ID tail on a single node: the counter and a single-node
# `leafraft serve` both pinned to core 1, the load generator to core 0, so neither shares a core
# with the load (the cluster beside a follower made its p99.9 swing 3x between runs). The
# counter's maximum rate (median of 3 runs, 64 connections), then at 50/75/90 % of it
# `leafraft-bench http --rate` (coordinated omission corrected, wrk2's rule) against each,
# alternating, 3 rounds: medians of p99.9 and their ratio (bar <= 1.25).
tail_section() {
  local counter single maxima=() max_rate first=${#pids[@]}
  counter=$(free_port)
  single=$(free_port)
  taskset -c 1 "$bench" counter-server --listen "127.0.0.1:$counter" >/dev/null 2>&1 &
  pids+=($!)
  taskset -c 1 "$bin" serve --listen "127.0.0.1:$single" --data-dir "$work/tail-single" >"$work/tail-single.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 200); do curl -sf "127.0.0.1:$single/readyz" >/dev/null && curl -sf "127.0.0.1:$counter/x" >/dev/null && break; sleep 0.05; done
  "$bin" tag create bench --step 1000 --server "http://127.0.0.1:$single" >/dev/null
  pinned_load() { taskset -c 0 "$bench" http --json --concurrency 64 "$@"; }
  local counter_url="http://127.0.0.1:$counter/x" single_url="http://127.0.0.1:$single/api/segment/get/bench"
  pinned_load --duration-secs 2 --url "$counter_url" >/dev/null
  pinned_load --duration-secs 2 --url "$single_url" >/dev/null
  for _ in 1 2 3; do
    maxima+=("$(pinned_load --duration-secs "$duration" --url "$counter_url" | field '["requests_per_sec"]')")
  done
  max_rate=$(python3 -c "import statistics as s; print(round(s.median([${maxima[0]}, ${maxima[1]}, ${maxima[2]}])))")
  echo "== 2b. one-ID tail on a single node, server on core 1 and load generator on core 0 (taskset), 64 connections, ${duration}s per run"
  echo "counter maximum $max_rate req/s (median of $(printf '%.0f ' "${maxima[@]}")req/s)"
  for pct in 50 75 90; do
    local rate=$((max_rate * pct / 100)) counter_p=() single_p=()
    pinned_load --duration-secs 3 --rate "$rate" --url "$single_url" >/dev/null
    for round in 1 2 3; do
      local base lr
      base=$(pinned_load --duration-secs "$duration" --rate "$rate" --url "$counter_url")
      lr=$(pinned_load --duration-secs "$duration" --rate "$rate" --url "$single_url")
      counter_p+=("$(echo "$base" | field '["p999_us"]')")
      single_p+=("$(echo "$lr" | field '["p999_us"]')")
      printf "%s %%  round %s  counter p99.9 %6s µs (uncorrected %s, late sends %s)  single node p99.9 %6s µs (uncorrected %s, late sends %s, errors %s, duplicates %s)\n" \
        "$pct" "$round" "${counter_p[-1]}" "$(echo "$base" | field '["service_p999_us"]')" "$(echo "$base" | field '["late_sends"]')" \
        "${single_p[-1]}" "$(echo "$lr" | field '["service_p999_us"]')" "$(echo "$lr" | field '["late_sends"]')" \
        "$(echo "$lr" | field '["errors_by_status"]')" "$(echo "$lr" | field '["duplicates"]')"
    done
    python3 - "$pct" "$rate" "${counter_p[*]}" "${single_p[*]}" <<'PY'
import statistics as s, sys
pct, rate = sys.argv[1], sys.argv[2]
c, n = s.median([int(x) for x in sys.argv[3].split()]), s.median([int(x) for x in sys.argv[4].split()])
ratio = n / c if c else float("inf")
print(f"{pct} % ({rate} req/s): p99.9 median counter {c/1000:.2f} ms, single node {n/1000:.2f} ms, ratio {ratio:.2f} (bar <= 1.25)")
PY
  done
  for pid in "${pids[@]:$first}"; do kill "$pid" 2>/dev/null || true; done
}

urls() { # urls PATH ADDR... -> comma separated URLs
  local path=$1; shift
  local out=()
  for addr in "$@"; do out+=("http://$addr$path"); done
  (IFS=,; echo "${out[*]}")
}

load() { "$bench" http --json --concurrency "$concurrency" --duration-secs "$duration" "$@"; }
# load_for SECS ARGS...: like load with its own duration.
load_for() { local secs=$1; shift; "$bench" http --json --concurrency "$concurrency" --duration-secs "$secs" "$@"; }
warm() { "$bench" http --json --concurrency "$concurrency" --duration-secs 2 "$@" >/dev/null; }

metric_total() { # metric_total REGEX ADDR...: sum of matching series over the nodes
  local regex=$1; shift
  local total=0
  for addr in "$@"; do
    n=$(curl -s "$addr/metrics" | awk -v re="$regex" '$0 ~ re {s+=$2} END {print s+0}')
    total=$((total + n))
  done
  echo "$total"
}
claims_total() { metric_total '^leafraft_segment_claims_total[{].*result="ok"' "$@"; }
waits_total() { metric_total '^leafraft_segment_waits_total[{]' "$@"; }

echo "== machine: $(nproc) cores; nodes run $bin; load generator: leafraft bench http, $concurrency connections, ${duration}s per run"

# The TLS bar: a TLS + mutual TLS cluster and the counter server behind the same TLS listener.
tls_section() {
  local tls=$work/tls ports=("$(free_port)" "$(free_port)" "$(free_port)") counter
  counter=$(free_port)
  "$certs" --out "$tls" --node 1=127.0.0.1 --node 2=127.0.0.1 --node 3=127.0.0.1 --node 9=127.0.0.1 >/dev/null
  local members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
  for i in 1 2 3; do
    "$bin" serve --node-id "$i" --listen "127.0.0.1:${ports[$((i-1))]}" --data-dir "$work/tls-$i" \
      --initial-cluster "$members" --tls-cert "$tls/node$i.pem" --tls-key "$tls/node$i.key" \
      --peer-ca "$tls/ca.pem" >"$work/tls-$i.log" 2>&1 &
    pids+=($!)
  done
  "$bench" counter-server --listen "127.0.0.1:$counter" --tls-cert "$tls/node9.pem" --tls-key "$tls/node9.key" \
    --ca "$tls/ca.pem" >/dev/null 2>&1 &
  pids+=($!)
  for port in "${ports[@]}" "$counter"; do
    for _ in $(seq 1 200); do curl -sf --cacert "$tls/ca.pem" "https://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
  done
  "$bin" tag create bench --step 1000 --server "https://127.0.0.1:${ports[0]}" --ca "$tls/ca.pem" >/dev/null
  local leaf base_url ratios=() targets=()
  for port in "${ports[@]}"; do targets+=("https://127.0.0.1:$port/api/segment/get/bench"); done
  leaf=$(IFS=,; echo "${targets[*]}")
  base_url="https://127.0.0.1:$counter/x"
  warm --ca "$tls/ca.pem" --url "$base_url" --no-check
  warm --ca "$tls/ca.pem" --url "$leaf"
  echo "== TLS: one ID per request over TLS (keep-alive), leafraft (3 nodes, mutual TLS between them) vs the counter server behind the same TLS stack, alternating, 3 rounds"
  for round in 1 2 3; do
    local base lr base_rps rps
    base=$(load --ca "$tls/ca.pem" --url "$base_url" --no-check)
    lr=$(load --ca "$tls/ca.pem" --url "$leaf")
    base_rps=$(echo "$base" | field '["requests_per_sec"]')
    rps=$(echo "$lr" | field '["requests_per_sec"]')
    printf "round %s  baseline %8.0f req/s (p99 %s µs)  leafraft %8.0f req/s (p99 %s µs, p99.9 %s µs, errors %s, duplicates %s)\n" \
      "$round" "$base_rps" "$(echo "$base" | field '["p99_us"]')" "$rps" "$(echo "$lr" | field '["p99_us"]')" \
      "$(echo "$lr" | field '["p999_us"]')" "$(echo "$lr" | field '["errors_by_status"]')" "$(echo "$lr" | field '["duplicates"]')"
    ratios+=("$(python3 -c "print($rps / $base_rps)")")
  done
  python3 -c "import statistics as s; r=[${ratios[0]},${ratios[1]},${ratios[2]}]; print('ratio     median %.2f (runs %s)' % (s.median(r), ', '.join('%.2f' % x for x in r)))"
}
if [ "$only_tls" = 1 ]; then
  tls_section
  exit 0
fi

counter_port=$(free_port)
"$bench" counter-server --listen "127.0.0.1:$counter_port" >/dev/null 2>&1 &
pids+=($!)
# Three more counter processes: what any three processes serving on this machine reach under the
# same load (the ceiling of a 3-node cluster against the one-process baseline on few cores).
counters3=()
for _ in 1 2 3; do
  port=$(free_port)
  "$bench" counter-server --listen "127.0.0.1:$port" >/dev/null 2>&1 &
  pids+=($!)
  counters3+=("127.0.0.1:$port")
done
start_cluster main
nodes=("${cluster[@]}")
"$bin" tag create bench --step 1000 --server "http://${nodes[0]}" >/dev/null
for addr in "127.0.0.1:$counter_port" "${counters3[@]}"; do
  for _ in $(seq 1 100); do curl -sf "$addr/x" >/dev/null && break; sleep 0.05; done
done

# 6. Monotonic tags: every call goes to the leader (directly here, as a client that reads
# /v1/cluster would), which confirms its leadership once per batch of concurrent calls.
monotonic_section() {
  local leader_id leader
  "$bin" tag create mono --step 1000 --mode monotonic --server "http://${nodes[0]}" >/dev/null
  leader_id=$(curl -s "${nodes[0]}/v1/cluster" | field '["leader_id"]')
  leader=${nodes[$((leader_id - 1))]}
  echo "== 6. monotonic tag at the leader (node $leader_id) vs counter baseline, ${duration}s per run"
  for count in 1 1000; do
    for c in 1 16 64; do
      local lr base
      lr=$("$bench" http --json --concurrency "$c" --duration-secs "$duration" --url "http://$leader/v1/segment/mono?count=$count")
      base=$("$bench" http --json --concurrency "$c" --duration-secs "$duration" --url "http://127.0.0.1:$counter_port/x" --no-check)
      printf "count=%-4s callers %-2s  monotonic %8.0f calls/s %12.0f IDs/s  p50 %5s µs  p99 %6s µs  errors %s duplicates %s | baseline %8.0f req/s\n" \
        "$count" "$c" "$(echo "$lr" | field '["requests_per_sec"]')" "$(echo "$lr" | field '["ids_per_sec"]')" \
        "$(echo "$lr" | field '["p50_us"]')" "$(echo "$lr" | field '["p99_us"]')" "$(echo "$lr" | field '["errors_by_status"]')" \
        "$(echo "$lr" | field '["duplicates"]')" "$(echo "$base" | field '["requests_per_sec"]')"
    done
  done
  monotonic_follower_and_ranges "$leader_id"
}

# Issue 29's bars. (1) count=1 through a follower (which batches what it forwards) against the
# leader itself, 64 callers, alternating, 3 rounds: calls/s, the ratio (bar >= 0.8), and the
# real-time order checked on every run's recorded history (send time, answer time, IDs).
# (2) /ranges?count=10000 of the monotonic tag at the leader: IDs/s (bar >= 200 M).
monotonic_follower_and_ranges() {
  local leader_id=$1 leader follower ratios=() run
  leader=${nodes[$((leader_id - 1))]}
  follower=${nodes[$((leader_id % 3))]}
  mono_run() { "$bench" http --json --history --concurrency 64 --duration-secs "$duration" --url "http://$1/v1/segment/mono?count=1"; }
  mono_line() { # mono_line WHERE REPORT
    printf "  %-8s %8.0f calls/s  p50 %5s µs  p99 %6s µs  errors %s duplicates %s  real-time order: %s violations over %s requests\n" \
      "$1" "$(echo "$2" | field '["requests_per_sec"]')" "$(echo "$2" | field '["p50_us"]')" "$(echo "$2" | field '["p99_us"]')" \
      "$(echo "$2" | field '["errors_by_status"]')" "$(echo "$2" | field '["duplicates"]')" \
      "$(echo "$2" | field '["real_time_violations"]')" "$(echo "$2" | field '["history_requests"]')"
  }
  # The follower batches once the cluster version allows it (the leader raises it within seconds of
  # forming); /ranges of a monotonic tag answers from then on.
  for _ in $(seq 1 200); do curl -sf "$follower/v1/segment/mono/ranges?count=1" >/dev/null && break; sleep 0.05; done
  echo "== 6b. monotonic count=1, 64 callers: through a follower vs at the leader (node $leader_id), alternating, 3 rounds, ${duration}s per run"
  warm --url "http://$follower/v1/segment/mono?count=1"
  for run in 1 2 3; do
    local at_leader at_follower
    at_leader=$(mono_run "$leader")
    at_follower=$(mono_run "$follower")
    echo "round $run"
    mono_line leader "$at_leader"
    mono_line follower "$at_follower"
    ratios+=("$(python3 -c "print($(echo "$at_follower" | field '["requests_per_sec"]') / $(echo "$at_leader" | field '["requests_per_sec"]'))")")
  done
  python3 -c "import statistics as s; r=[${ratios[0]},${ratios[1]},${ratios[2]}]; print('follower/leader ratio median %.2f (runs %s; bar >= 0.8)' % (s.median(r), ', '.join('%.2f' % x for x in r)))"
  echo "== 6c. monotonic /ranges?count=10000 at the leader, 64 callers, ${duration}s"
  run=$("$bench" http --json --history --concurrency 64 --duration-secs "$duration" --url "http://$leader/v1/segment/mono/ranges?count=10000")
  printf "ranges    %8.0f calls/s %14.0f IDs/s (bar >= 200 M)  p99 %6s µs  errors %s duplicates %s  real-time order violations %s\n" \
    "$(echo "$run" | field '["requests_per_sec"]')" "$(echo "$run" | field '["ids_per_sec"]')" "$(echo "$run" | field '["p99_us"]')" \
    "$(echo "$run" | field '["errors_by_status"]')" "$(echo "$run" | field '["duplicates"]')" "$(echo "$run" | field '["real_time_violations"]')"
}
# 6d. Strict order without a clock: the default confirmation (one heartbeat round a quorum
# acknowledges per batch of takes, or a claim of the batch committed in the term) against the
# leader lease it replaced (commit dcd6af4, the last with the lease, built once like the upgrade
# baseline), the same load on a cluster of each, alternating, 3 rounds: monotonic count=1 with 64
# callers at the leader and through a follower. Bars: default >= 0.8x the lease at the leader, and
# through a follower >= 0.8x the default at the leader.
lease_section() {
  local lease_bin ratios=() follower_ratios=() run
  lease_bin=$(scripts/lib/build-commit.sh "$lease_commit")
  echo "== 6d. monotonic count=1, 64 callers: this build (no clock in the argument) vs the leader lease of ${lease_commit:0:12}, alternating, 3 rounds, ${duration}s per run"
  leader_and_follower() { # leader_and_follower NODE... -> "leader follower" addresses
    local id
    id=$(curl -s "$1/v1/cluster" | field '["leader_id"]')
    echo "${cluster[$((id - 1))]} ${cluster[$((id % 3))]}"
  }
  local ours lease ours_leader ours_follower lease_leader lease_follower
  "$bin" tag create mono --step 1000 --mode monotonic --server "http://${nodes[0]}" >/dev/null 2>&1 || true
  cluster=("${nodes[@]}")
  read -r ours_leader ours_follower <<<"$(leader_and_follower "${nodes[0]}")"
  bin=$lease_bin start_cluster lease
  local lease_nodes=("${cluster[@]}")
  "$lease_bin" tag create mono --step 1000 --mode monotonic --server "http://${lease_nodes[0]}" >/dev/null
  read -r lease_leader lease_follower <<<"$(leader_and_follower "${lease_nodes[0]}")"
  for addr in "$ours_follower" "$lease_follower"; do
    for _ in $(seq 1 200); do curl -sf "$addr/v1/segment/mono/ranges?count=1" >/dev/null && break; sleep 0.05; done
  done
  mono() { "$bench" http --json --history --concurrency 64 --duration-secs "$duration" --url "http://$1/v1/segment/mono?count=1"; }
  warm --url "http://$ours_follower/v1/segment/mono?count=1"
  warm --url "http://$lease_follower/v1/segment/mono?count=1"
  for run in 1 2 3; do
    local a b c d
    a=$(mono "$ours_leader"); b=$(mono "$lease_leader"); c=$(mono "$ours_follower"); d=$(mono "$lease_follower")
    printf "round %s  leader: this %8.0f calls/s (p99 %s µs, violations %s)  lease %8.0f calls/s (p99 %s µs)\n" "$run" \
      "$(echo "$a" | field '["requests_per_sec"]')" "$(echo "$a" | field '["p99_us"]')" "$(echo "$a" | field '["real_time_violations"]')" \
      "$(echo "$b" | field '["requests_per_sec"]')" "$(echo "$b" | field '["p99_us"]')"
    printf "         follower: this %8.0f calls/s (p99 %s µs, violations %s)  lease %8.0f calls/s (p99 %s µs)\n" \
      "$(echo "$c" | field '["requests_per_sec"]')" "$(echo "$c" | field '["p99_us"]')" "$(echo "$c" | field '["real_time_violations"]')" \
      "$(echo "$d" | field '["requests_per_sec"]')" "$(echo "$d" | field '["p99_us"]')"
    ratios+=("$(python3 -c "print($(echo "$a" | field '["requests_per_sec"]') / $(echo "$b" | field '["requests_per_sec"]'))")")
    follower_ratios+=("$(python3 -c "print($(echo "$c" | field '["requests_per_sec"]') / $(echo "$a" | field '["requests_per_sec"]'))")")
  done
  python3 -c "import statistics as s; r=[${ratios[0]},${ratios[1]},${ratios[2]}]; print('this/lease at the leader   median %.2f (runs %s; bar >= 0.8)' % (s.median(r), ', '.join('%.2f' % x for x in r)))"
  python3 -c "import statistics as s; r=[${follower_ratios[0]},${follower_ratios[1]},${follower_ratios[2]}]; print('follower/leader (this)     median %.2f (runs %s; bar >= 0.8)' % (s.median(r), ', '.join('%.2f' % x for x in r)))"
}
if [ "$only_one_id" = 1 ]; then
  one_id_section
  tail_section
  exit 0
fi
if [ "$only_monotonic" = 1 ]; then
  monotonic_section
  lease_section
  exit 0
fi
if [ "$only_monotonic" = 3 ]; then
  lease_section
  exit 0
fi
if [ "$only_monotonic" = 2 ]; then
  "$bin" tag create mono --step 1000 --mode monotonic --server "http://${nodes[0]}" >/dev/null
  monotonic_follower_and_ranges "$(curl -s "${nodes[0]}/v1/cluster" | field '["leader_id"]')"
  exit 0
fi

# Warm up both (connections, buffers, dynamic step).
warm --url "http://127.0.0.1:$counter_port/x" --no-check
warm --url "$(urls /api/segment/get/bench "${nodes[@]}")"

# Snowflake needs each node to hold a worker.
for addr in "${nodes[@]}"; do
  for _ in $(seq 1 200); do curl -s "$addr/readyz" | grep -q '"worker_id"' && break; sleep 0.05; done
done

# compare NAME URLS: alternates baseline, leafraft and three-counter runs (three rounds each, so all
# see the same machine state) and prints each run, the median ratio and the ceiling; sets lr_rps to
# leafraft's median.
compare() {
  local name=$1 urls=$2 ratios=() lr_runs=() ceilings=() shares=()
  for round in 1 2 3; do
    local base lr three base_rps rps three_rps
    base=$(load --url "http://127.0.0.1:$counter_port/x")
    lr=$(load --url "$urls")
    three=$(load --url "$(urls /x "${counters3[@]}")")
    base_rps=$(echo "$base" | field '["requests_per_sec"]')
    rps=$(echo "$lr" | field '["requests_per_sec"]')
    three_rps=$(echo "$three" | field '["requests_per_sec"]')
    printf "round %s  baseline %8.0f req/s (p99.9 %s µs)  %s %8.0f req/s (p99 %s µs, p99.9 %s µs, errors %s, duplicates %s)  three counters %8.0f req/s\n" \
      "$round" "$base_rps" "$(echo "$base" | field '["p999_us"]')" "$name" "$rps" "$(echo "$lr" | field '["p99_us"]')" \
      "$(echo "$lr" | field '["p999_us"]')" "$(echo "$lr" | field '["errors_by_status"]')" "$(echo "$lr" | field '["duplicates"]')" "$three_rps"
    ratios+=("$(python3 -c "print($rps / $base_rps)")")
    ceilings+=("$(python3 -c "print($three_rps / $base_rps)")")
    shares+=("$(python3 -c "print($rps / $three_rps)")")
    lr_runs+=("$rps")
  done
  python3 -c "import statistics as s; r=[${ratios[0]},${ratios[1]},${ratios[2]}]; print('ratio     median %.2f (runs %s) (bar >= 0.8)' % (s.median(r), ', '.join('%.2f' % x for x in r)))"
  python3 -c "import statistics as s; c=[${ceilings[0]},${ceilings[1]},${ceilings[2]}]; f=[${shares[0]},${shares[1]},${shares[2]}]; print('ceiling   three counter processes reach %.2f of one (runs %s); leafraft reaches %.2f of them' % (s.median(c), ', '.join('%.2f' % x for x in c), s.median(f)))"
  lr_rps=$(python3 -c "import statistics as s; print(s.median([${lr_runs[0]},${lr_runs[1]},${lr_runs[2]}]))")
}

# 7. Time-sequence IDs: one namespace (the default layout: 524,288 sequences per second, shared by
# every node and shard), created through the CLI; every node serves it (after its first peer clock
# check).
timeseq_section() {
  "$bin" timeseq create bench --server "http://${nodes[0]}" >/dev/null
  for addr in "${nodes[@]}"; do
    for _ in $(seq 1 200); do curl -sf "$addr/v1/timeseq/bench?shard=0" >/dev/null && break; sleep 0.05; done
  done
  warm --url "$(urls '/api/timeseq/get/bench?shard=7' "${nodes[@]}")"
  echo "== 7a. one time-sequence ID per request (/api/timeseq/get): leafraft (3 nodes) vs counter baseline, alternating, 3 rounds"
  compare timeseq "$(urls '/api/timeseq/get/bench?shard=7' "${nodes[@]}")"
  echo "== 7b. one namespace through count=1000 over three nodes (shards 1, 2, 3), ${duration}s, 3 runs"
  local runs=()
  for round in 1 2 3; do
    local ts t0 wall
    t0=$(date +%s.%N)
    ts=$(load --url "$(urls '/v1/timeseq/bench?shard=1&count=1000' "${nodes[0]}"),$(urls '/v1/timeseq/bench?shard=2&count=1000' "${nodes[1]}"),$(urls '/v1/timeseq/bench?shard=3&count=1000' "${nodes[2]}")")
    # IDs over the whole wall time of the run: requests still in flight at the deadline (waiting
    # for the next second) finish after it, so the load generator's own IDs/s over exactly
    # --duration-secs overstates a rate capped per second.
    wall=$(python3 -c "print($(date +%s.%N) - $t0)")
    local rate
    rate=$(python3 -c "print($(echo "$ts" | field '["ids"]') / $wall)")
    printf "run %s  %10.0f IDs in %.2f s = %8.0f IDs/s = %5.1f %% of 524,288/s  requests %s  p50 %s µs  p99 %s µs  errors %s  duplicates %s\n" \
      "$round" "$(echo "$ts" | field '["ids"]')" "$wall" "$rate" "$(python3 -c "print($rate / 5242.88)")" \
      "$(echo "$ts" | field '["ok"]')" "$(echo "$ts" | field '["p50_us"]')" "$(echo "$ts" | field '["p99_us"]')" \
      "$(echo "$ts" | field '["errors_by_status"]')" "$(echo "$ts" | field '["duplicates"]')"
    runs+=("$rate")
  done
  python3 -c "import statistics as s; m=s.median([${runs[0]},${runs[1]},${runs[2]}]); print('median    %.0f IDs/s = %.1f %% of the layout limit (bar >= 95 %%)' % (m, m / 5242.88))"
  printf "claims %s, waits %s, exhausted seconds %s (sum over the nodes)\n" \
    "$(metric_total '^leafraft_timeseq_events_total[{]kind="claims"' "${nodes[@]}")" \
    "$(metric_total '^leafraft_timeseq_events_total[{]kind="waits"' "${nodes[@]}")" \
    "$(metric_total '^leafraft_timeseq_events_total[{]kind="exhausted_seconds"' "${nodes[@]}")"
}
# 8. Scrambled IDs: the same cluster serves a plain tag (`bench`) and scrambled ones, all step
# 1000; each pair of runs alternates a plain and a scrambled tag under the same load, 3 rounds,
# and the ratio is the median of the per-round ratios of FIELD (requests/s for one ID, IDs/s for
# lists). The timed runs keep no IDs (`--no-check`): the load generator merges a plain tag's
# consecutive IDs into one run per answer but must keep a scrambled tag's one by one (16 bytes
# each, a gigabyte in 5 s), and that bookkeeping on the same 2 cores would be charged to
# scrambling. Each pair's warm-up runs (2 s, every ID kept) check both tags for duplicates.
# 8d sets the 63-bit scrambled tag against a plain one whose IDs are as wide (19 digits, from
# 10^18): what the permutation costs, without what a wider answer costs.
scramble_section() {
  "$bin" tag create scrambled --step 1000 --scramble --server "http://${nodes[0]}" >/dev/null
  "$bin" tag create scrambled32 --step 1000 --scramble --scramble-bits 32 --server "http://${nodes[0]}" >/dev/null
  "$bin" tag create wide --step 1000 --max-id 1000000000000000000 --server "http://${nodes[0]}" >/dev/null
  for addr in "${nodes[@]}"; do
    for tag in scrambled scrambled32 wide; do
      for _ in $(seq 1 200); do curl -sf "$addr/api/segment/get/$tag" >/dev/null && break; sleep 0.05; done
    done
  done
  # scramble_pair NAME FIELD BAR PATH_PLAIN PATH_SCRAMBLED
  scramble_pair() {
    local name=$1 field_name=$2 bar=$3 plain scrambled ratios=() round checked_plain checked_scrambled
    plain=$(urls "$4" "${nodes[@]}")
    scrambled=$(urls "$5" "${nodes[@]}")
    checked_plain=$(load_for 2 --url "$plain")
    checked_scrambled=$(load_for 2 --url "$scrambled")
    echo "== 8$name, alternating, 3 rounds, ${duration}s per run"
    printf "warm-up, every ID kept: plain %s IDs, %s duplicates; scrambled %s IDs, %s duplicates\n" \
      "$(echo "$checked_plain" | field '["ids"]')" "$(echo "$checked_plain" | field '["duplicates"]')" \
      "$(echo "$checked_scrambled" | field '["ids"]')" "$(echo "$checked_scrambled" | field '["duplicates"]')"
    for round in 1 2 3; do
      local p s p_val s_val
      p=$(load --no-check --url "$plain")
      s=$(load --no-check --url "$scrambled")
      p_val=$(echo "$p" | field "[\"$field_name\"]")
      s_val=$(echo "$s" | field "[\"$field_name\"]")
      printf "round %s  plain %12.0f %s (p99 %s µs)  scrambled %12.0f %s (p99 %s µs, errors %s)\n" \
        "$round" "$p_val" "$field_name" "$(echo "$p" | field '["p99_us"]')" "$s_val" "$field_name" \
        "$(echo "$s" | field '["p99_us"]')" "$(echo "$s" | field '["errors_by_status"]')"
      ratios+=("$(python3 -c "print($s_val / $p_val)")")
    done
    python3 -c "import statistics as s; r=[${ratios[0]},${ratios[1]},${ratios[2]}]; print('scrambled / plain  median %.2f (runs %s) (bar >= $bar)' % (s.median(r), ', '.join('%.2f' % x for x in r)))"
  }
  scramble_pair "a. one scrambled ID per request (Leaf's path) vs a plain one" requests_per_sec 0.95 \
    /api/segment/get/bench /api/segment/get/scrambled
  scramble_pair "b. count=1000 lists: scrambled (63 bits: 19-digit IDs) vs plain" ids_per_sec 0.8 \
    '/v1/segment/bench?count=1000' '/v1/segment/scrambled?count=1000'
  scramble_pair "c. count=1000 lists: scrambled in 32 bits (10-digit IDs) vs plain" ids_per_sec 0.8 \
    '/v1/segment/bench?count=1000' '/v1/segment/scrambled32?count=1000'
  scramble_pair "d. count=1000 lists: scrambled (63 bits) vs plain IDs as wide (19 digits)" ids_per_sec 0.8 \
    '/v1/segment/wide?count=1000' '/v1/segment/scrambled?count=1000'
}
if [ "$only_scramble" = 1 ]; then
  scramble_section
  exit 0
fi

if [ "$only_timeseq" = 1 ]; then
  warm --url "http://127.0.0.1:$counter_port/x" --no-check
  timeseq_section
  exit 0
fi

echo "== 1. one ID per request: leafraft (3 nodes) vs counter baseline, alternating, 3 rounds"
compare segment "$(urls /api/segment/get/bench "${nodes[@]}")"
one_id_section
if [ "$only_single" = 1 ]; then
  echo "== 5. one snowflake ID per request: leafraft (3 nodes) vs counter baseline, alternating, 3 rounds"
  warm --url "$(urls /api/snowflake/get/bench "${nodes[@]}")"
  compare snowflake "$(urls /api/snowflake/get/bench "${nodes[@]}")"
  exit 0
fi

half=$(python3 -c "print(round($lr_rps / 2))")
echo "== 2. latency at half of leafraft's peak ($half req/s, open loop)"
lat=$(load --url "$(urls /api/segment/get/bench "${nodes[@]}")" --rate "$half")
base_lat=$(load --url "http://127.0.0.1:$counter_port/x" --rate "$half")
printf "leafraft  p50 %s µs  p99 %s µs  p99.9 %s µs  max %s µs  late sends %s (bar p99.9 <= 1000)\n" \
  "$(echo "$lat" | field '["p50_us"]')" "$(echo "$lat" | field '["p99_us"]')" "$(echo "$lat" | field '["p999_us"]')" "$(echo "$lat" | field '["max_us"]')" "$(echo "$lat" | field '["late_sends"]')"
printf "baseline  p50 %s µs  p99 %s µs  p99.9 %s µs  max %s µs\n" \
  "$(echo "$base_lat" | field '["p50_us"]')" "$(echo "$base_lat" | field '["p99_us"]')" "$(echo "$base_lat" | field '["p999_us"]')" "$(echo "$base_lat" | field '["max_us"]')"

tail_section

echo "== 3. batches of 1000"
list=$(load --url "$(urls '/v1/segment/bench?count=1000' "${nodes[@]}")")
ranges=$(load --url "$(urls '/v1/segment/bench/ranges?count=1000' "${nodes[@]}")")
printf "list      %12.0f IDs/s (bar >= 10,000,000)  duplicates %s\n" "$(echo "$list" | field '["ids_per_sec"]')" "$(echo "$list" | field '["duplicates"]')"
printf "ranges    %12.0f IDs/s (bar >= 30,000,000)  duplicates %s\n" "$(echo "$ranges" | field '["ids_per_sec"]')" "$(echo "$ranges" | field '["duplicates"]')"

# A segment must outlive the claim of the next one (Leaf loads it at 10 % used, so 90 % of a
# segment's life covers the claim). With the dynamic step pinned, step 300 at a quarter of the
# peak lasts ~25 ms per node, which covers a claim's p99 at that load; at the peak rate a
# saturated 2-core machine stretches claims to 30-60 ms and no fixed small step can hide that
# (the dynamic step exists for exactly this).
quarter=$((half / 2))
echo "== 4. segment switches (step 300, dynamic step pinned by --segment-duration-ms 1, ${switch_secs}s at $quarter req/s)"
start_cluster switch --segment-duration-ms 1
small=("${cluster[@]}")
"$bin" tag create switch --step 300 --server "http://${small[0]}" >/dev/null
before=$(claims_total "${small[@]}")
sw=$(load_for "$switch_secs" --url "$(urls /api/segment/get/switch "${small[@]}")" --rate "$quarter")
after=$(claims_total "${small[@]}")
waits=$(waits_total "${small[@]}")
sw_base=$(load_for "$switch_secs" --url "http://127.0.0.1:$counter_port/x" --rate "$quarter")
printf "leafraft  switches %s  requests %s  waits for a claim %s  over 5 ms %s  max %s µs  p99.9 %s µs  duplicates %s\n" \
  "$((after - before))" "$(echo "$sw" | field '["ok"]')" "$waits" "$(echo "$sw" | field '["over_5ms"]')" "$(echo "$sw" | field '["max_us"]')" \
  "$(echo "$sw" | field '["p999_us"]')" "$(echo "$sw" | field '["duplicates"]')"
printf "baseline  same rate and time: requests %s  over 5 ms %s  max %s µs  p99.9 %s µs\n" \
  "$(echo "$sw_base" | field '["ok"]')" "$(echo "$sw_base" | field '["over_5ms"]')" "$(echo "$sw_base" | field '["max_us"]')" "$(echo "$sw_base" | field '["p999_us"]')"
echo "(bar: >= 1000 switches and no request over 5 ms; a request waited on a switch only if 'waits for a claim' > 0)"

echo "== 5. one snowflake ID per request: leafraft (3 nodes) vs counter baseline, alternating, 3 rounds"
warm --url "$(urls /api/snowflake/get/bench "${nodes[@]}")"
compare snowflake "$(urls /api/snowflake/get/bench "${nodes[@]}")"

monotonic_section
lease_section

timeseq_section

scramble_section
