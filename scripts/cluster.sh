#!/usr/bin/env bash
# A local 3-node leafraft cluster in one command.
#   scripts/cluster.sh up      build (release), start nodes 1-3 on 127.0.0.1:8081-8083, wait until ready
#   scripts/cluster.sh up --tls   the same with TLS and mutual TLS between the nodes: a throwaway CA
#                              and node certificates in ./cluster-data/tls (scripts/make-certs.sh);
#                              clients use --ca cluster-data/tls/ca.pem and https://
#   scripts/cluster.sh rotate  (a --tls cluster) new node certificates from the same CA, then SIGHUP
#   scripts/cluster.sh status  members, roles, leader (leafraft cluster status)
#   scripts/cluster.sh down    stop the nodes gracefully (SIGTERM: a follower, then the leader with the
#                              other follower); data stays in ./cluster-data
#   scripts/cluster.sh wipe    down, then remove ./cluster-data
#   `down` exits 1, naming the node and what, when a node could not give back a segment tail or
#   its worker (a gap, never a duplicate) or had to be killed; "cluster stopped" means all went back.
# LEAFRAFT_CLUSTER_DIR moves the data and logs; the ports are 8081-8083 (LEAFRAFT_CLUSTER_PORTS,
# three ports, moves them); LEAFRAFT_BIN runs that binary instead of building the release one.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
dir=${LEAFRAFT_CLUSTER_DIR:-./cluster-data}
bin=${LEAFRAFT_BIN:-${CARGO_TARGET_DIR:-./target}/release/leafraft}
read -r -a ports <<<"${LEAFRAFT_CLUSTER_PORTS:-8081 8082 8083}"
[ "${#ports[@]}" = 3 ] || { echo "LEAFRAFT_CLUSTER_PORTS must name three ports" >&2; exit 2; }
port() { echo "${ports[$(($1 - 1))]}"; }
members="1=127.0.0.1:${ports[0]},2=127.0.0.1:${ports[1]},3=127.0.0.1:${ports[2]}"
tls=no
[ "${2:-}" = "--tls" ] && tls=yes
[ -f "$dir/tls/ca.pem" ] && [ "${1:-}" != up ] && tls=yes
scheme=http
curl_ca=()
cli_ca=()
if [ "$tls" = yes ]; then
  scheme=https
  curl_ca=(--cacert "$dir/tls/ca.pem")
  cli_ca=(--ca "$dir/tls/ca.pem")
fi

# Whether node $1's process runs (a killed one nobody has reaped yet, a zombie, does not).
running() {
  local pid
  [ -f "$dir/node$1.pid" ] || return 1
  pid=$(cat "$dir/node$1.pid")
  kill -0 "$pid" 2>/dev/null || return 1
  ! grep -q '^[0-9]* (.*) Z' "/proc/$pid/stat" 2>/dev/null
}

up() {
  [ -n "${LEAFRAFT_BIN:-}" ] || cargo build --release --quiet
  mkdir -p "$dir"
  local tls_flags=()
  if [ "$tls" = yes ]; then
    [ -f "$dir/tls/node1.pem" ] || scripts/make-certs.sh "$dir/tls" 1=127.0.0.1,localhost 2=127.0.0.1,localhost 3=127.0.0.1,localhost
  fi
  for i in 1 2 3; do
    if running "$i"; then
      echo "node $i already running (pid $(cat "$dir/node$i.pid"))"
      continue
    fi
    tls_flags=()
    if [ "$tls" = yes ]; then
      tls_flags=(--tls-cert "$dir/tls/node$i.pem" --tls-key "$dir/tls/node$i.key" --peer-ca "$dir/tls/ca.pem")
    fi
    nohup "$bin" serve --node-id "$i" --listen "127.0.0.1:$(port "$i")" --data-dir "$dir/node$i" \
      --initial-cluster "$members" "${tls_flags[@]}" >>"$dir/node$i.log" 2>&1 &
    echo $! >"$dir/node$i.pid"
  done
  for i in 1 2 3; do
    ready=no
    for _ in $(seq 1 300); do
      if curl -sf "${curl_ca[@]}" "$scheme://127.0.0.1:$(port "$i")/readyz" >/dev/null 2>&1; then ready=yes; break; fi
      running "$i" || break
      sleep 0.1
    done
    if [ "$ready" != yes ]; then
      echo "node $i is not ready; its log ($dir/node$i.log) ends with:" >&2
      tail -5 "$dir/node$i.log" >&2
      exit 1
    fi
  done
  "$bin" cluster status --server "$scheme://127.0.0.1:${ports[0]}" "${cli_ca[@]}"
  cat <<TXT

Cluster up: nodes on 127.0.0.1:${ports[0]}, :${ports[1]}, :${ports[2]} (status page: $scheme://127.0.0.1:${ports[0]}/).
  curl -s ${curl_ca[*]} -XPOST $scheme://127.0.0.1:${ports[0]}/v1/tags -d '{"tag":"order","step":1000}'
  curl -s ${curl_ca[*]} $scheme://127.0.0.1:${ports[1]}/api/segment/get/order
  curl -s ${curl_ca[*]} $scheme://127.0.0.1:${ports[2]}/api/snowflake/get/any
Stop it with scripts/cluster.sh down (data stays in $dir) or wipe.
TXT
}

# New node certificates from the same CA, picked up by SIGHUP without a restart.
rotate() {
  if [ "$tls" != yes ]; then echo "not a --tls cluster" >&2; exit 2; fi
  scripts/make-certs.sh "$dir/tls" 1=127.0.0.1,localhost 2=127.0.0.1,localhost 3=127.0.0.1,localhost
  for i in 1 2 3; do
    if running "$i"; then kill -HUP "$(cat "$dir/node$i.pid")"; fi
  done
  echo "certificates rotated; each node logs 'TLS certificates reloaded'"
}

# SIGTERM to the given nodes together, then wait (10 s at most, then SIGKILL) until they are gone.
stop_nodes() {
  local i
  for i in "$@"; do
    if running "$i"; then kill -TERM "$(cat "$dir/node$i.pid")"; fi
  done
  for i in "$@"; do
    for _ in $(seq 1 200); do running "$i" || break; sleep 0.05; done
    if running "$i"; then
      echo "node $i did not stop in 10 s; killing it" | tee -a "$dir/node$i.log" >&2
      kill -KILL "$(cat "$dir/node$i.pid")" 2>/dev/null || true
    fi
    rm -f "$dir/node$i.pid"
  done
}

# The leader's node ID as a running node reports it (/v1/cluster), or nothing.
leader_id() {
  local i
  for i in 1 2 3; do
    running "$i" || continue
    curl -sf --max-time 2 "${curl_ca[@]}" "$scheme://127.0.0.1:$(port "$i")/v1/cluster" 2>/dev/null \
      | sed -n 's/.*"leader_id":\([0-9][0-9]*\).*/\1/p' | grep . && return 0
  done
  return 0
}

# A stopping node first gives back its segment tails and snowflake worker through Raft, which
# needs a majority up. So: one follower alone (two members stay up to commit its give-backs),
# then the leader and the other follower together (each commits with the other still up; each
# stays in Raft a moment after its own give-backs, so the other's can still commit). The leader
# last and alone could not commit its own and would wait ~5 s (--write-timeout-ms) and warn.
# Then each node's log since the SIGTERM says whether everything went back: "cluster stopped"
# only if it did; otherwise which node could not give back what, and exit status 1.
down() {
  local leader i followers=() offsets=() lost=()
  if ! running 1 && ! running 2 && ! running 3; then
    echo "no node is running"
    return 0
  fi
  leader=$(leader_id)
  for i in 1 2 3; do
    if [ "$i" != "$leader" ] && running "$i"; then followers+=("$i"); fi
    offsets[i]=$(stat -c %s "$dir/node$i.log" 2>/dev/null || echo 0)
  done
  if [ -n "$leader" ] && [ ${#followers[@]} = 2 ]; then
    stop_nodes "${followers[0]}"
    stop_nodes "${followers[1]}" "$leader"
  else
    stop_nodes 1 2 3
  fi
  for i in 1 2 3; do
    [ -f "$dir/node$i.log" ] || continue
    while IFS= read -r line; do
      lost+=("node $i: $line")
    done < <(tail -c +"$((offsets[i] + 1))" "$dir/node$i.log" \
      | grep -E 'not released|not every segment tail was given back|did not stop in 10 s' || true)
  done
  if [ ${#lost[@]} -gt 0 ]; then
    echo "cluster stopped, but not everything was given back (gaps, never duplicates):" >&2
    printf '  %s\n' "${lost[@]}" >&2
    return 1
  fi
  echo "cluster stopped; every node gave back its segment tails and worker"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) "$bin" cluster status --server "$scheme://127.0.0.1:${ports[0]}" "${cli_ca[@]}" ;;
  rotate) rotate ;;
  wipe) down || true; rm -rf "$dir"; echo "removed $dir" ;;
  *) echo "usage: scripts/cluster.sh up [--tls]|status|rotate|down|wipe" >&2; exit 2 ;;
esac
