#!/usr/bin/env bash
# The client libraries: the Java, Go and Python clients' own unit tests, then one
# conformance suite that drives all four clients (Rust, Java, Go, Python) the same way against
# real `leafraft serve` processes.
#
#   scripts/clients-test.sh                unit tests, the conformance suite, the planted-bug self-test,
#                                          the benchmarks (scripts/bench-clients.sh, bars reported)
#   scripts/clients-test.sh --conformance  the conformance suite only
#   LEAFRAFT_CONFORMANCE_PLANT=reuse-range scripts/clients-test.sh --conformance
#                                          every client reuses a range after a failover: the suite
#                                          must fail, naming the clients that handed out an ID twice
#
# The suite: a 3-node cluster on free loopback ports; each client's conformance program
# (client/examples/conformance.rs, clients/*/…conformance…) takes IDs of a segment tag (from its
# local ranges) and of a monotonic tag, while the suite kills the leader (kill -9), restarts it,
# restarts a follower (kill -9, same flags) and removes a member. Then it checks that every ID
# from every client is unique, that the monotonic tag's IDs keep real-time order across clients
# (a take that began after another ended has a larger ID), that every client kept serving after
# the last fault, and that each client answers the server's errors as its typed errors: an
# unknown tag (TAG_NOT_FOUND), a cluster it is not pinned to (CLUSTER_MISMATCH), a node that never
# answers (its timeout type, within the time budget); over TLS with a custom CA and a bearer token
# (UNAUTHORIZED without it); and that the start-up and pass-through calls work against a real
# node: create a tag and a namespace if missing (twice: created, then already there), snowflake
# IDs decoded by the server and locally alike, time-sequence IDs in long and string form decoded.
#
# The planted bug: a switch inside each client, off by default and out of reach of applications
# (Rust: the `conformance-plant` cargo feature, compiled only into the conformance example; Go:
# package internal/plant; Java: a package-private field; Python: leafraft._plant), turned on by
# the conformance programs alone when LEAFRAFT_CONFORMANCE_PLANT=reuse-range. With it a client
# serves its previous range once more after a failover. The full run ends with a self-test: a
# fresh cluster, the switch on in every client, the leader killed; the checker must find
# duplicates for every client, or the suite fails (it would no longer catch the bug).
#
# Installs nothing (.ci/run installs JDK 17, junit5, golang-go from Debian); a missing toolchain is
# an error. Uses target/release/leafraft (built when missing) and free ports (never 8080-8084).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

mode=full
case "${1:-}" in
  "") ;;
  --conformance) mode=conformance ;;
  *) echo "usage: scripts/clients-test.sh [--conformance]" >&2; exit 2 ;;
esac

junit=/usr/share/java/junit-platform-console-standalone.jar
missing=()
for tool in java javac go python3 cargo curl openssl; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ -f "$junit" ] || missing+=("$junit (Debian's junit5)")
if [ ${#missing[@]} -gt 0 ]; then
  echo "clients-test: missing: ${missing[*]} (.ci/run installs default-jdk-headless junit5 golang-go)" >&2
  exit 1
fi
java_major=$(javac -version 2>&1 | sed -E 's/^javac ([0-9]+).*/\1/')
if [ "${java_major:-0}" -lt 17 ]; then
  echo "clients-test: javac $java_major found, the Java client needs 17" >&2
  exit 1
fi
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' || { echo "clients-test: python3 >= 3.9 needed" >&2; exit 1; }

# shellcheck source=scripts/lib/processes.sh
source scripts/lib/processes.sh
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
export GOCACHE=${GOCACHE:-$root/target/go-cache}

step() { echo "clients-test: $*"; }

# --- the clients' own unit tests ---------------------------------------------------------------
build_java() {
  local out=$1 J=/usr/share/java
  rm -rf "$out" && mkdir -p "$out"
  javac -Xlint:all -Werror -d "$out/classes" $(find clients/java/src/main/java -name '*.java')
  javac -Xlint:all -Werror -d "$out/conformance" -cp "$out/classes" $(find clients/java/src/conformance/java -name '*.java')
  javac -d "$out/test-classes" -cp "$out/classes:$J/junit-jupiter-api.jar:$J/apiguardian-api.jar:$J/opentest4j.jar" \
    $(find clients/java/src/test/java -name '*.java')
}

if [ "$mode" = full ]; then
  step "Go: go vet, go test -race"
  (cd clients/go && go vet ./... && go test -race -count=1 ./...)
  step "Python: unittest"
  python3 -m unittest discover -s clients/python/tests
  step "Java: javac -Werror, JUnit 5"
  build_java "$work/java"
  java -jar "$junit" -cp "$work/java/classes:$work/java/test-classes" --select-package io.leafraft.client \
    --disable-banner --details=tree --fail-if-no-tests
  step "Rust: leafraft-client's unit tests run in cargo test --workspace"
fi

# --- the conformance programs --------------------------------------------------------------------
bin=${CARGO_TARGET_DIR:-./target}/release/leafraft
if [ ! -x "$bin" ]; then
  step "building target/release/leafraft"
  cargo build --release --quiet
fi
step "building the conformance programs"
# Its own package selection: the feature reaches leafraft-client in this build only, never the
# leafraft binary (which is built without it).
cargo build --release --quiet -p leafraft-client --example conformance --features conformance-plant
[ -d "$work/java/classes" ] || build_java "$work/java"
(cd clients/go && go build -o "$work/go-conformance" ./cmd/leafraft-conformance)
declare -A program=(
  [rust]="${CARGO_TARGET_DIR:-./target}/release/examples/conformance"
  [java]="java -XX:+UseSerialGC -cp $work/java/classes:$work/java/conformance io.leafraft.client.Conformance"
  [go]="$work/go-conformance"
  [python]="python3 clients/python/conformance.py"
)
clients=(rust java go python)

# --- a cluster ------------------------------------------------------------------------------------
declare -A node_port node_pid node_dir
members=""

wait_ready() { # URL [curl flags...]
  local url=$1; shift
  for _ in $(seq 1 300); do
    curl -sf "$@" "$url" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "clients-test: $url never became ready" >&2
  return 1
}

start_node() { # ID
  local i=$1
  "$bin" serve --node-id "$i" --listen "127.0.0.1:${node_port[$i]}" --data-dir "${node_dir[$i]}" \
    --initial-cluster "$members" >>"${node_dir[$i]}.log" 2>&1 &
  node_pid[$i]=$!
  pids+=("$!")
}

start_cluster() { # NAME
  local name=$1 list=()
  for i in 1 2 3; do
    node_port[$i]=$(free_port)
    node_dir[$i]="$work/$name-node$i"
    list+=("$i=127.0.0.1:${node_port[$i]}")
  done
  members=$(IFS=,; echo "${list[*]}")
  for i in 1 2 3; do start_node "$i"; done
  for i in 1 2 3; do wait_ready "http://127.0.0.1:${node_port[$i]}/readyz"; done
}

# The leader's node ID as node $1 sees it (empty when it knows none).
leader_of() {
  curl -sf "http://127.0.0.1:${node_port[$1]}/v1/cluster" 2>/dev/null \
    | python3 -c 'import json,sys; l=json.load(sys.stdin).get("leader_id"); print(l if l else "")' 2>/dev/null || true
}

# Waits until a live node other than $1 (optional) names a leader other than $1; prints it.
await_leader() {
  local not=${1:-0}
  for _ in $(seq 1 200); do
    for i in 1 2 3; do
      [ "$i" = "$not" ] && continue
      local leader
      leader=$(leader_of "$i")
      if [ -n "$leader" ] && [ "$leader" != "$not" ]; then echo "$leader"; return 0; fi
    done
    sleep 0.1
  done
  echo "clients-test: no leader elected" >&2
  return 1
}

create_tags() {
  local url="http://127.0.0.1:${node_port[1]}"
  curl -sf -XPOST "$url/v1/tags" -H 'Content-Type: application/json' -d '{"tag":"conf","step":1000}' >/dev/null
  curl -sf -XPOST "$url/v1/tags" -H 'Content-Type: application/json' -d '{"tag":"conf-mono","mode":"monotonic"}' >/dev/null
}

now_us() { python3 -c 'import time; print(time.time_ns() // 1000)'; }

# Starts every client's run program against nodes in the given order; sets run_pid.
declare -A run_pid
start_runs() { # LABEL NODES [PLANT [TAG]]
  local label=$1 nodes=$2 plant=${3-${LEAFRAFT_CONFORMANCE_PLANT:-}} tag=${4:-conf}
  rm -f "$work/$label.stop"
  for c in "${clients[@]}"; do
    # shellcheck disable=SC2086
    LEAFRAFT_CONFORMANCE_PLANT="$plant" ${program[$c]} run --nodes "$nodes" --tag "$tag" --mono conf-mono \
      --out "$work/$label-$c.out" --stop "$work/$label.stop" >"$work/$label-$c.log" 2>&1 &
    run_pid[$c]=$!
    pids+=("$!")
  done
}

stop_runs() { # LABEL
  touch "$work/$1.stop"
  local failed=0
  for c in "${clients[@]}"; do
    if ! wait "${run_pid[$c]}"; then
      echo "clients-test: the $c program failed:" >&2
      tail -5 "$work/$1-$c.log" >&2
      failed=1
    fi
  done
  cat "$work/$1-"{rust,java,go,python}.log | grep -E '^(rust|java|go|python):' || true
  return $failed
}

# The checker: every ID unique across clients, real-time order of the monotonic takes across
# clients, and every client serving after the last fault. --expect-duplicates inverts the first
# check per client (the planted self-test).
check() { # LABEL AFTER_US [--expect-duplicates]
  python3 - "$work" "$1" "$2" "${3:-}" "${clients[@]}" <<'PY'
import sys
from collections import Counter, defaultdict

work, label, after, expect_dup, clients = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "--expect-duplicates", sys.argv[5:]
owner = {}
dup_by = Counter()
examples = defaultdict(list)
takes = []
passed = failed = 0

def verdict(ok, text):
    global passed, failed
    print(("  ok    " if ok else "  FAIL  ") + text)
    if ok:
        passed += 1
    else:
        failed += 1

for client in clients:
    segment = monotonic = 0
    errors = Counter()
    served_after = mono_after = False
    with open(f"{work}/{label}-{client}.out") as lines:
        for line in lines:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "s":
                for text in parts[1:]:
                    taken = int(text)
                    segment += 1
                    if taken in owner:
                        dup_by[client] += 1
                        if len(examples[client]) < 3:
                            examples[client].append(f"{taken} (first from {owner[taken]})")
                    else:
                        owner[taken] = client
                if mono_after and len(parts) > 1:
                    served_after = True
            elif parts[0] == "m":
                sent, received, taken = int(parts[1]), int(parts[2]), int(parts[3])
                takes.append((sent, received, taken, client))
                monotonic += 1
                mono_after = mono_after or sent > after
            elif parts[0] == "e":
                errors[parts[1]] += 1
    print(f"  {client}: {segment} segment IDs, {monotonic} monotonic, errors on the way {dict(errors) or 'none'}")
    if not expect_dup:
        verdict(segment >= 1000 and monotonic >= 10, f"{client} took IDs of both tags")
        verdict(served_after, f"{client} served both tags after the last fault")

for client in clients:
    if expect_dup:
        verdict(dup_by[client] > 0, f"{client} with the planted reuse: duplicates caught ({dup_by[client]}, e.g. {examples[client][:1]})")
    else:
        verdict(dup_by[client] == 0, f"{client}: no segment ID handed out twice" +
                (f" -- {dup_by[client]} duplicates, e.g. {', '.join(examples[client])}" if dup_by[client] else ""))

if not expect_dup:
    ids = Counter(t[2] for t in takes)
    twice = [i for i, n in ids.items() if n > 1]
    verdict(not twice, f"monotonic: {len(takes)} takes, no ID twice" + (f" -- e.g. {twice[:3]}" if twice else ""))
    # For every take b: every take a that ended before b began has a smaller ID.
    by_end = sorted(takes, key=lambda t: t[1])
    best, best_take, j, violations = -1, None, 0, []
    for b in sorted(takes, key=lambda t: t[0]):
        while j < len(by_end) and by_end[j][1] < b[0]:
            if by_end[j][2] > best:
                best, best_take = by_end[j][2], by_end[j]
            j += 1
        if best >= b[2]:
            violations.append((best_take, b))
    verdict(not violations, "monotonic: real-time order across clients" +
            (f" -- {len(violations)} violations, e.g. {violations[0]}" if violations else ""))
print(f"conformance {label}: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
}

# --- 1. typed errors, and TLS with a custom CA and a bearer token ----------------------------------
step "starting a 3-node cluster"
start_cluster main
create_tags
nodes_all="127.0.0.1:${node_port[1]},127.0.0.1:${node_port[2]},127.0.0.1:${node_port[3]}"

hole_port=$(free_port)
python3 -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(128); time.sleep(3600)' "$hole_port" &
pids+=("$!")

tls_port=$(free_port)
mkdir -p "$work/tls"
(
  cd "$work/tls"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=conformance-ca 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout node.key -out node.csr -subj /CN=localhost 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n' >node.ext
  openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out node.pem -days 2 -extfile node.ext 2>/dev/null
)
"$bin" serve --node-id 1 --listen "127.0.0.1:$tls_port" --data-dir "$work/tls-node" \
  --tls-cert "$work/tls/node.pem" --tls-key "$work/tls/node.key" --ca "$work/tls/ca.pem" \
  --admin-token conformance-admin --client-token app:conformance-client >"$work/tls-node.log" 2>&1 &
pids+=("$!")
wait_ready "https://127.0.0.1:$tls_port/readyz" --cacert "$work/tls/ca.pem"
curl -sf --cacert "$work/tls/ca.pem" -H 'Authorization: Bearer conformance-admin' -XPOST \
  "https://127.0.0.1:$tls_port/v1/tags" -H 'Content-Type: application/json' -d '{"tag":"conf"}' >/dev/null

step "typed errors, TLS and a token, the start-up and pass-through calls, per client"
errors_failed=0
for c in "${clients[@]}"; do
  # shellcheck disable=SC2086
  answer=$( { ${program[$c]} errors --nodes "$nodes_all" --blackhole "127.0.0.1:$hole_port";
              ${program[$c]} tls --nodes "127.0.0.1:$tls_port" --ca "$work/tls/ca.pem" \
                --token conformance-client --tag conf;
              ${program[$c]} kinds --nodes "$nodes_all" --tag "conf-start-$c" --ns "conf-ns-$c"; } 2>&1 ) || true
  for expected in "unknown-tag TAG_NOT_FOUND" "cluster-mismatch CLUSTER_MISMATCH" "timeout TIMEOUT" \
                  "tls ok 10" "unauthorized UNAUTHORIZED" "create-tag true false none none" \
                  "create-namespace true false none none" "snowflake ok" "timeseq ok" "timeseq-string ok"; do
    line=$(grep -E "^${expected%% *} " <<<"$answer" | head -1 || true)
    ok=no
    case "$line" in
      "$expected") ok=yes ;;
      "timeout TIMEOUT "*) ms=${line##* }; [ "$ms" -le 3000 ] && ok=yes ;;
    esac
    if [ "$ok" = yes ]; then
      echo "  ok    $c: $line"
    else
      echo "  FAIL  $c: expected '$expected', got '${line:-nothing}'"
      errors_failed=$((errors_failed + 1))
    fi
  done
done

# --- 2. IDs from every client while the cluster loses its leader, a follower and a member ---------
leader=$(await_leader)
order=("$leader")
for i in 1 2 3; do [ "$i" != "$leader" ] && order+=("$i"); done
nodes_leader_first="127.0.0.1:${node_port[${order[0]}]},127.0.0.1:${node_port[${order[1]}]},127.0.0.1:${node_port[${order[2]}]}"
step "every client takes IDs (nodes leader first: $nodes_leader_first)"
start_runs run "$nodes_leader_first"
sleep 4
step "kill -9 the leader (node $leader)"
kill -9 "${node_pid[$leader]}"
new_leader=$(await_leader "$leader")
step "node $new_leader leads"
sleep 3
step "restart node $leader"
start_node "$leader"
wait_ready "http://127.0.0.1:${node_port[$leader]}/readyz"
sleep 3
follower=""
for i in 1 2 3; do [ "$i" != "$leader" ] && [ "$i" != "$new_leader" ] && follower=$i; done
step "restart the follower node $follower (kill -9, same flags)"
kill -9 "${node_pid[$follower]}"
sleep 1
start_node "$follower"
wait_ready "http://127.0.0.1:${node_port[$follower]}/readyz"
sleep 3
current=$(await_leader)
removed=""
for i in "$follower" "$leader" 1 2 3; do [ "$i" != "$current" ] && { removed=$i; break; }; done
step "remove member $removed (left running) through the leader, node $current"
"$bin" cluster remove --node-id "$removed" --server "http://127.0.0.1:${node_port[$current]}" >/dev/null
after_faults=$(now_us)
sleep 5
step "stopping the clients"
runs_ok=0
stop_runs run || runs_ok=1
conformance_ok=0
check run "$after_faults" || conformance_ok=1

# --- 2b. a scrambled tag: its IDs form no ranges (/ranges answers MODE_MISMATCH), so every
# client's segment handle reads it from Leaf's list path; the same checks hold ---------------------
current=$(await_leader)
members=()
for i in 1 2 3; do [ "$i" != "$removed" ] && members+=("127.0.0.1:${node_port[$i]}"); done
step "every client takes IDs of a scrambled tag (members ${members[*]})"
curl -sf -XPOST "http://127.0.0.1:${node_port[$current]}/v1/tags" -H 'Content-Type: application/json' \
  -d '{"tag":"conf-scrambled","scramble":true,"step":1000}' >/dev/null
start_runs scrambled "$(IFS=,; echo "${members[*]}")" "${LEAFRAFT_CONFORMANCE_PLANT:-}" conf-scrambled
sleep 4
stop_runs scrambled || runs_ok=1
check scrambled 0 || conformance_ok=1

# --- 3. the self-test: the planted range reuse must be caught for every client ---------------------
planted_ok=0
if [ "$mode" = full ]; then
  for i in 1 2 3; do kill "${node_pid[$i]}" 2>/dev/null || true; done
  step "self-test: a fresh cluster, every client with LEAFRAFT_CONFORMANCE_PLANT=reuse-range"
  start_cluster planted
  create_tags
  leader=$(await_leader)
  order=("$leader")
  for i in 1 2 3; do [ "$i" != "$leader" ] && order+=("$i"); done
  start_runs planted \
    "127.0.0.1:${node_port[${order[0]}]},127.0.0.1:${node_port[${order[1]}]},127.0.0.1:${node_port[${order[2]}]}" reuse-range
  sleep 3
  step "self-test: kill -9 the leader (node $leader)"
  kill -9 "${node_pid[$leader]}"
  await_leader "$leader" >/dev/null
  sleep 4
  stop_runs planted || planted_ok=1
  check planted 0 --expect-duplicates || planted_ok=1
fi

# --- 4. the benchmarks: each client's next_id against its language's atomic
bench_ok=0
if [ "$mode" = full ]; then
  for i in 1 2 3; do kill "${node_pid[$i]}" 2>/dev/null || true; done
  step "benchmarks (scripts/bench-clients.sh)"
  # A missed bar (exit 3) is reported, not failed: one run's timing on a shared 2-core machine is
  # noise (Java measured 0.86-3.52x across runs here); a client that cannot be measured fails.
  bench_status=0
  scripts/bench-clients.sh || bench_status=$?
  case $bench_status in
    0) ;;
    3) echo "clients-test: a benchmark bar was missed in this run (reported above; timings are not a test)" ;;
    *) bench_ok=1 ;;
  esac
fi

total_failed=$((errors_failed + runs_ok + conformance_ok + planted_ok + bench_ok))
if [ "$total_failed" -ne 0 ]; then
  echo "clients-test: FAILED (typed errors: $errors_failed failed; programs: $runs_ok; conformance: $conformance_ok; self-test: $planted_ok; benchmarks: $bench_ok)" >&2
  exit 1
fi
echo "clients-test: all clients conform"
