#!/usr/bin/env bash
# Claims/s and commit latency of Raft-committed segment claims on a local 3-node cluster
# (loopback HTTP, sled with fdatasync) at 1, 4 and 16 concurrent claimers, and, in the same run,
# the same claim as a compare-and-swap transaction on a local 3-member etcd (SPEC §7's baseline).
# etcd comes from Debian's etcd-server package; without it (and without root to install it) the
# etcd half is skipped with a message.
# Usage: scripts/bench-claims.sh [--duration-secs S]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=5
[ "${1:-}" = "--duration-secs" ] && duration=$2

cargo build --release --quiet -p leafraft -p leafraft-tools
bin=./target/release/leafraft
bench=./target/release/leafraft-bench
"$bench" claims --nodes 3 --concurrency 1,4,16 --duration-secs "$duration"

if ! command -v etcd >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null 2>&1 || true
  fi
fi
if ! command -v etcd >/dev/null 2>&1; then
  echo "etcd baseline skipped: install Debian's etcd-server to run it"
  exit 0
fi

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
client=() peer=()
for i in 1 2 3; do client+=("$(free_port)"); peer+=("$(free_port)"); done
initial="e1=http://127.0.0.1:${peer[0]},e2=http://127.0.0.1:${peer[1]},e3=http://127.0.0.1:${peer[2]}"
for i in 0 1 2; do
  etcd --name "e$((i+1))" --data-dir "$work/e$((i+1))" \
    --listen-client-urls "http://127.0.0.1:${client[$i]}" --advertise-client-urls "http://127.0.0.1:${client[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${peer[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${peer[$i]}" \
    --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token leafraft-bench \
    >"$work/e$((i+1)).log" 2>&1 &
  pids+=($!)
done
for port in "${client[@]}"; do
  for _ in $(seq 1 200); do curl -sf "127.0.0.1:$port/health" | grep -q true && break; sleep 0.05; done
done
echo "etcd $(etcd --version | head -1 | awk '{print $3}'), 3 members on loopback (fsync on, as always in etcd):"
"$bench" etcd-claims --concurrency 1,4,16 --duration-secs "$duration" \
  --endpoint "http://127.0.0.1:${client[0]},http://127.0.0.1:${client[1]},http://127.0.0.1:${client[2]}"
