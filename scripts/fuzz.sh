#!/usr/bin/env bash
# The fuzz properties, run long: every decoder on the wire and on disk, the import and
# config parsers, and every HTTP route of an in-process node, fed arbitrary and mutated input.
#
#   scripts/fuzz.sh --minutes 30                    # rounds until 30 minutes are up
#   scripts/fuzz.sh --minutes 5 --cases 20000       # cases per property and round (default 10000)
#   scripts/fuzz.sh --minutes 30 --report fuzz.md   # also write the summary to a file
#
# Each round runs every property (`cargo test` names starting with `fuzz_`) with fresh random
# seeds, in the `fuzz` profile: optimised, with debug assertions and overflow checks kept on.
# A failing round stops the run, keeps its output and prints where; the last line is
# `RESULT: PASS|FAIL ...` and the exit code matches.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

minutes=10
cases=10000
report=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --cases) cases="$2"; shift 2 ;;
    --report) report="$2"; shift 2 ;;
    *) echo "usage: scripts/fuzz.sh [--minutes N] [--cases N] [--report FILE]" >&2; exit 2 ;;
  esac
done

echo "fuzz: building the fuzz properties (profile fuzz)"
cargo test --profile fuzz --quiet --no-run --test fuzz -p leafraft
cargo test --profile fuzz --quiet --no-run -p storage --lib

logs="$(mktemp -d -t leafraft-fuzz-XXXXXX)"
deadline=$((SECONDS + minutes * 60))
started=$SECONDS
rounds=0
properties=0
while [ $SECONDS -lt $deadline ]; do
  round_log="$logs/round-$((rounds + 1)).log"
  if ! LEAFRAFT_FUZZ_CASES="$cases" cargo test --profile fuzz --test fuzz -p leafraft -- fuzz_ --nocapture \
      >"$round_log" 2>&1 \
    || ! LEAFRAFT_FUZZ_CASES="$cases" cargo test --profile fuzz -p storage --lib -- fuzz_ --nocapture \
      >>"$round_log" 2>&1; then
    grep -E "panicked|Test failed|minimal failing" -A20 "$round_log" | head -60 >&2 || true
    echo "fuzz: round $((rounds + 1)) failed; its output is in $round_log" >&2
    echo "RESULT: FAIL after $rounds passing rounds ($((SECONDS - started)) s)"
    exit 1
  fi
  rounds=$((rounds + 1))
  properties=$(grep -c "^test .*fuzz_.* ok$" "$round_log" || true)
  echo "fuzz: round $rounds passed ($properties properties, $cases cases each, $((SECONDS - started)) s so far)"
done

summary="$(cat <<SUMMARY
fuzz: $rounds rounds in $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s, no failure; \
per round $properties properties, $cases cases each (per type where a property covers several; \
store opens a hundredth)
answers of the HTTP routes in the last round (route: {status: count}, 0: no answer in time):
$(grep -E "^  [A-Z]+ /|node replaced|the node was replaced" "$logs/round-$rounds.log")
SUMMARY
)"
echo "$summary"
if [ -n "$report" ]; then
  echo "$summary" >"$report"
fi
echo "RESULT: PASS ($rounds rounds)"
