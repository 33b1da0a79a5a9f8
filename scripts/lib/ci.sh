# Sourced by the check scripts: what to do when a tool, registry or device a check needs is missing.
#   cannot_run NAME WHAT-IS-MISSING
# In CI (CI=true, which .ci/run exports) a check that cannot run has failed: it says what is missing
# and exits 1. Elsewhere (a developer's machine) it says so and exits 0: skipped, not passed.
cannot_run() {
  local name=$1
  shift
  if [ "${CI:-}" = true ]; then
    echo "$name: FAIL: cannot run on this CI machine: $*" >&2
    exit 1
  fi
  echo "$name: SKIPPED (not in CI): $*"
  exit 0
}
