#!/usr/bin/env bash
# A throwaway CA and node certificates for leafraft's TLS and mutual TLS (rcgen; no OpenSSL).
#   scripts/make-certs.sh DIR 1=127.0.0.1 2=127.0.0.1 3=127.0.0.1       # CA (kept if DIR has one) + nodes
#   scripts/make-certs.sh DIR 2=10.0.0.2,leafraft2                        # a rotation: a new cert for node 2
#   scripts/make-certs.sh --new-ca DIR 1=...                              # replace the CA as well
# Each node certificate names node-<ID>.leafraft (what --peer-ca checks on /raft/*) and the hosts
# given (what clients and peers verify). Files: DIR/ca.pem, DIR/ca.key, DIR/node<ID>.pem, .key.
set -euo pipefail
cd "$(dirname "$0")/.."
extra=()
if [ "${1:-}" = "--new-ca" ]; then extra+=(--new-ca); shift; fi
if [ $# -lt 2 ]; then
  echo "usage: scripts/make-certs.sh [--new-ca] DIR ID=HOST[,HOST...] ..." >&2
  exit 2
fi
dir=$1; shift
nodes=()
for node in "$@"; do nodes+=(--node "$node"); done
cargo build --release --quiet -p leafraft-tools --bin leafraft-certs
"${CARGO_TARGET_DIR:-./target}/release/leafraft-certs" --out "$dir" "${nodes[@]}" "${extra[@]}"
