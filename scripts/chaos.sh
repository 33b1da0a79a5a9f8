#!/usr/bin/env bash
# The chaos suite: real `leafraft serve` processes, concurrent clients on every ID
# endpoint, a seeded schedule of faults, and a checker that fails on any duplicate ID.
#
#   scripts/chaos.sh --seed 7 --nodes 3 --duration 60      # one run (any leafraft-chaos flags)
#   scripts/chaos.sh --soak 30m --report /tmp/soak.md      # back-to-back runs, 3 and 5 nodes
#   scripts/chaos.sh --ci                                   # the short set CI runs
#   scripts/chaos.sh --faults power-loss,power-loss-all --fsync false   # power cuts, unsafe nodes
#
# As root with `ip` and `iptables`, every node gets its own network namespace and partitions are
# injected; otherwise nodes share loopback and partition faults are skipped (the run says so).
# Clock faults need Debian's libfaketime; the power-loss faults need FUSE (/dev/fuse, and
# fusermount3 and fuse-overlayfs, which the runner's FUSE probe mounts: Debian's fuse3 and
# fuse-overlayfs).
# The runner's exit codes mean one thing each: 0 PASS, 1 FAIL, 2 its command line was refused,
# 77 this machine cannot inject a fault kind asked for (`RESULT: CANNOT RUN HERE` and why).
# The last line of every run is `RESULT: ...`. A failing run keeps its logs and says where.
# LEAFRAFT_CHAOS_RUNNER=path runs that leafraft-chaos (and the leafraft beside it) without building.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

if [ -n "${LEAFRAFT_CHAOS_RUNNER:-}" ]; then
  runner=$LEAFRAFT_CHAOS_RUNNER
else
  echo "chaos: cargo build --release (leafraft and leafraft-chaos)"
  cargo build --release --quiet -p leafraft -p leafraft-tools --bin leafraft --bin leafraft-chaos
  target_dir="$(cargo metadata --format-version 1 --no-deps 2>/dev/null \
    | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
  runner="${target_dir:-target}/release/leafraft-chaos"
fi

if [ "${1:-}" != "--ci" ]; then
  exec "$runner" "$@"
fi

# The CI short set: both cluster sizes and, between them, the fifteen fault kinds named below
# (seeds picked with `leafraft-chaos --seed N --duration 60 --dry-run`): the wiped member in every
# run, a majority lost and recovered from a survivor in both 60 s runs, and in every run the busy
# tag `chaos-switch` moved from segment to monotonic (its own lane, once, a fifth to half
# way through, so it adds no time and leaves the other kinds' schedules as they were), judged by
# `switch-real-time` from the move's 200 on; about 4 minutes in all (the issue allows 6), and the
# power-loss run below, about one more.
# Seeds are fixed so a red CI is rerun exactly, with the same command.
#
# Nothing in the set passes unchecked: every run is --strict (a kind this machine cannot inject
# stops it with exit 77 before it starts), a run fails when a check's event never happened although
# its fault was injected (NOT EXERCISED), and the set fails unless every fault kind it names was
# injected at least once by the runs that ran (kinds a run missed get a short run of their own
# first). Exit 77 fails the set in CI (CI=true); elsewhere
# that run is skipped, saying why, and its kinds are not expected. Any other exit code but 0 fails.
all_kinds=kill-leader,kill-follower,pause-leader,pause-follower,isolate-leader,split-majority,bridge
all_kinds+=,clock-step,clock-drift,membership,graceful-restart,whole-restart,wipe-member,lose-majority
all_kinds+=,switch-to-monotonic
power_kinds=power-loss,power-loss-all

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
started=$SECONDS
failed=()
expected=()
injected=()
runs=0
# ci_run LABEL KINDS RUNNER-ARGS...: one run of the set, judged by its exit code.
ci_run() {
  local label=$1 kinds=$2 code=0 log
  shift 2
  runs=$((runs + 1))
  log="$logs/run$runs.log"
  echo "chaos: $* --faults $kinds --strict"
  "$runner" "$@" --faults "$kinds" --strict | tee "$log" || code=$?
  case $code in
    0 | 1)
      [ "$code" = 0 ] || failed+=("$label")
      IFS=, read -r -a kinds_of_run <<<"$kinds"
      expected+=("${kinds_of_run[@]}")
      # `faults: kill-leader 3, bridge 1` (or `faults: none`): the kinds this run injected.
      local line
      line=$(sed -n 's/^faults: //p' "$log" | tail -n 1)
      if [ -n "$line" ] && [ "$line" != none ]; then
        local entry
        while IFS= read -r entry; do
          injected+=("${entry% *}")
        done < <(printf '%s\n' "$line" | tr ',' '\n' | sed 's/^ *//')
      fi
      ;;
    77)
      local why
      why=$(sed -n 's/^RESULT: CANNOT RUN HERE //p' "$log" | tail -n 1)
      if [ "${CI:-}" = true ]; then
        failed+=("$label: cannot run on this CI machine $why")
      else
        echo "chaos: SKIPPED $label: this machine cannot run it $why (in CI, CI=true, this fails)"
      fi
      ;;
    *) failed+=("$label: leafraft-chaos exited $code (its command line refused, or it crashed)") ;;
  esac
}
for run in "112 3 60" "66 5 60" "90 3 45"; do
  read -r seed nodes duration <<<"$run"
  ci_run "seed $seed ($nodes nodes)" "$all_kinds" --seed "$seed" --nodes "$nodes" --duration "$duration"
done
# A seed fixes the schedule, not how long each fault takes: on a loaded machine a kind planned near
# the end of a run can fall past it. Kinds the three runs named but did not inject get one more
# run of their own (30 s, seed 7), so the set still injects and checks every one of them.
# contains WORD ITEM...: whether WORD is one of the ITEMs. No `printf | grep -q`: under pipefail,
# grep leaving at the first match killed printf with SIGPIPE, which read as "not found".
contains() {
  local word=$1 item
  shift
  for item in "$@"; do [ "$item" = "$word" ] && return 0; done
  return 1
}
top_up=()
for kind in ${all_kinds//,/ }; do
  if contains "$kind" "${expected[@]}" && ! contains "$kind" "${injected[@]}"; then
    top_up+=("$kind")
  fi
done
if [ ${#top_up[@]} -gt 0 ]; then
  echo "chaos: the runs above did not inject ${top_up[*]}: one more run of those alone"
  ci_run "seed 7 (top-up: ${top_up[*]})" "$(IFS=,; echo "${top_up[*]}")" --seed 7 --nodes 3 --duration 30
fi
# Strict order with the leader cut off while its followers restart quickly on a shorter election
# timeout (twice, 0.4 s apart): the path on which the leader lease of dcd6af4 answered after a newer
# leader had (it gave real-time violations there; see docs/reliability.md). Every node on 1500 ms,
# the restarted followers on 150 ms.
ci_run "seed 3 (isolated leader, quick restarts)" isolated-leader-restarts --seed 3 --nodes 3 --duration 20 \
  --election-timeout-ms 1500
# One power-loss run: every node's data directory on a FUSE mount that drops what was
# never synced; one node's power cut and every node's at once.
# Seed 1: 8 single-node and 3 whole-cluster cuts; with --fsync false it served 3,019 IDs twice.
ci_run "seed 1 (power loss)" "$power_kinds" --seed 1 --nodes 3 --duration 40

never=()
for kind in $(printf '%s\n' "${expected[@]}" | sort -u); do
  contains "$kind" "${injected[@]}" || never+=("$kind")
done
if [ ${#never[@]} -gt 0 ]; then
  failed+=("fault kinds the set names but never injected: ${never[*]}")
fi
echo "chaos: CI set took $((SECONDS - started)) s; fault kinds injected: $(printf '%s\n' "${injected[@]}" | sort -u | wc -l) of the $(printf '%s\n' "${expected[@]}" | sort -u | wc -l) named by the runs that ran"
if [ ${#failed[@]} -gt 0 ]; then
  echo "chaos: FAIL:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
if [ ${#expected[@]} -eq 0 ]; then
  echo "chaos: SKIPPED: no run of the CI set can run on this machine (the lines above say why)"
  exit 0
fi
echo "chaos: every run that ran passed, and injected every fault kind it named"
