#!/usr/bin/env bash
# Claims/s and commit latency of Raft-committed segment claims on a local 3-node cluster
# (loopback HTTP, sled with fdatasync) at 1, 4 and 16 concurrent claimers.
# Usage: scripts/bench-claims.sh [extra `leafraft bench claims` flags, e.g. --duration-secs 10]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec ./target/release/leafraft bench claims --nodes 3 --concurrency 1,4,16 "$@"
