#!/usr/bin/env bash
# The chaos suite (issue 6): real `leafraft serve` processes, concurrent clients on every ID
# endpoint, a seeded schedule of faults, and a checker that fails on any duplicate ID.
#
#   scripts/chaos.sh --seed 7 --nodes 3 --duration 60      # one run (any leafraft-chaos flags)
#   scripts/chaos.sh --soak 30m --report /tmp/soak.md      # back-to-back runs, 3 and 5 nodes
#   scripts/chaos.sh --ci                                   # the short set CI runs
#   scripts/chaos.sh --faults power-loss,power-loss-all --fsync false   # power cuts, unsafe nodes
#
# As root with `ip` and `iptables`, every node gets its own network namespace and partitions are
# injected; otherwise nodes share loopback and partition faults are skipped (the run says so).
# Clock faults need Debian's libfaketime; the power-loss faults need FUSE (/dev/fuse; fusermount3
# from Debian's fuse3 when not root) and without it exit 2 with `RESULT: SKIP` and the reason.
# The last line of every run is `RESULT: PASS|FAIL ...`; the exit code is non-zero on any FAIL.
# A failing run keeps its logs and says where.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

echo "chaos: cargo build --release (leafraft and leafraft-chaos)"
cargo build --release --quiet -p leafraft -p leafraft-tools --bin leafraft --bin leafraft-chaos
target_dir="$(cargo metadata --format-version 1 --no-deps 2>/dev/null \
  | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
runner="${target_dir:-target}/release/leafraft-chaos"

if [ "${1:-}" != "--ci" ]; then
  exec "$runner" "$@"
fi

# The CI short set: both cluster sizes and, between them, all fourteen fault kinds (seeds picked with
# `leafraft-chaos --seed N --duration 60 --dry-run`): the wiped member in every run, a majority lost
# and recovered from a survivor in both 60 s runs; about 4 minutes in all (the issue allows 6), and
# the power-loss run below, about one more.
# Seeds are fixed so a red CI is rerun exactly, with the same command.
started=$SECONDS
failed=()
for run in "112 3 60" "66 5 60" "90 3 45"; do
  read -r seed nodes duration <<<"$run"
  echo "chaos: --seed $seed --nodes $nodes --duration $duration"
  if ! "$runner" --seed "$seed" --nodes "$nodes" --duration "$duration"; then
    failed+=("seed $seed ($nodes nodes)")
  fi
done
# One power-loss run (issue 24): every node's data directory on a FUSE mount that drops what was
# never synced; one node's power cut and every node's at once. Exit code 2 means FUSE is unusable
# here: that run alone is skipped, and says so.
# Seed 1: 8 single-node and 3 whole-cluster cuts; with --fsync false it served 3,019 IDs twice.
echo "chaos: --seed 1 --nodes 3 --duration 40 --faults power-loss,power-loss-all"
code=0
"$runner" --seed 1 --nodes 3 --duration 40 --faults power-loss,power-loss-all || code=$?
case $code in
  0) ;;
  2) echo "chaos: SKIPPED the power-loss run: FUSE is unusable here (the line above says why)" ;;
  *) failed+=("seed 1 (power loss)") ;;
esac
echo "chaos: CI set took $((SECONDS - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "chaos: FAIL: ${failed[*]}" >&2
  exit 1
fi
echo "chaos: every run passed"
