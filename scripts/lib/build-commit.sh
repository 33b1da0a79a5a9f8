#!/usr/bin/env bash
# scripts/lib/build-commit.sh COMMIT: builds the `leafraft` binary of COMMIT in release mode once
# and prints its path (cached under target/commits/). The commit's sources come from `git archive`;
# its dependencies compile into this tree's target/ (CARGO_BUILD_BUILD_DIR), so what both share is
# built once. For benchmarks that compare this build with an earlier one in the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
commit=$(git rev-parse --verify "$1^{commit}")
shared_build_dir="${CARGO_TARGET_DIR:-$PWD/target}"
cache="$shared_build_dir/commits"
binary="$cache/leafraft-${commit:0:12}"
if [ ! -x "$binary" ]; then
  echo "build-commit: building leafraft at ${commit:0:12} in release mode (once)" >&2
  src="$cache/src-${commit:0:12}"
  rm -rf "$src"
  mkdir -p "$src"
  git archive --format=tar "$commit" | tar -x -C "$src"
  (cd "$src" && CARGO_BUILD_BUILD_DIR="$shared_build_dir" cargo build --release --locked --quiet -p leafraft --bin leafraft --target-dir "$cache/target") >&2
  cp "$cache/target/release/leafraft" "$binary.tmp"
  mv "$binary.tmp" "$binary"
  rm -rf "$src"
fi
echo "$binary"
