#!/usr/bin/env bash
# The rolling-upgrade test: a live 3-node cluster on the previous release (the baseline,
# releases/0.1.0) upgraded member by member to this tree's binary while clients take IDs, one
# member rolled back, and the cluster version moving only after the last member.
#
#   scripts/upgrade-test.sh               # build the baseline if not cached, run the test
#   scripts/upgrade-test.sh --build-only  # only build (or find) the baseline binary
#
# The baseline is built once, in release mode, from `git archive` of its commit with a target
# directory of its own under target/upgrade-baseline/ (a cold build takes ~5-8 min on 2 cores);
# later runs reuse the binary. The test itself is `tests/e2e/upgrade.rs`, run with
# LEAFRAFT_BASELINE_BIN pointing at that binary (without it, that test says it is skipped).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

version=0.1.0
commit="$(tr -d '[:space:]' < "releases/$version")"
if ! [[ "$commit" =~ ^[0-9a-f]{40}$ ]]; then
  echo "upgrade-test: releases/$version does not hold a full commit hash" >&2
  exit 1
fi
shared_build_dir="$PWD/target"
cache="$shared_build_dir/upgrade-baseline"
binary="$cache/leafraft-$version-${commit:0:12}"

if [ -x "$binary" ]; then
  echo "upgrade-test: baseline $version ($commit) cached at $binary"
else
  if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    # A shallow clone: fetch the baseline's history from where this clone came from.
    echo "upgrade-test: commit $commit of release $version is not in this clone; fetching it"
    git fetch --quiet --unshallow 2>/dev/null || git fetch --quiet origin "$commit" 2>/dev/null || true
  fi
  if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
    echo "upgrade-test: commit $commit of release $version is not in this clone and cannot be fetched" >&2
    exit 1
  fi
  echo "upgrade-test: building baseline $version ($commit) in release mode"
  src="$cache/src-${commit:0:12}"
  rm -rf "$src"
  mkdir -p "$src"
  git archive --format=tar "$commit" | tar -x -C "$src"
  # Only the server binary: the baseline's tools, tests and benches are not needed. Its build
  # directory is this tree's target/: the dependencies both releases share at the same version and
  # features are compiled once (the workspace crates differ in version, so nothing is overwritten),
  # and only the final binary lands in the baseline's own target directory.
  (cd "$src" && CARGO_BUILD_BUILD_DIR="$shared_build_dir" cargo build --release --locked --quiet -p leafraft --bin leafraft --target-dir "$cache/target")
  cp "$cache/target/release/leafraft" "$binary.tmp"
  mv "$binary.tmp" "$binary"
  rm -rf "$src"
fi

if [ "${1:-}" = "--build-only" ]; then
  exit 0
fi

# `--workspace`: the same build as the README's `cargo test --workspace` (whose tools enable the
# `planted` feature the gate-off test needs), so nothing is compiled again for this step; the
# package alone would build its dependencies with another feature set.
echo "upgrade-test: cargo test --workspace --test e2e upgrade (baseline $version)"
LEAFRAFT_BASELINE_BIN="$binary" cargo test --quiet --workspace --test e2e upgrade -- --nocapture --test-threads 1
