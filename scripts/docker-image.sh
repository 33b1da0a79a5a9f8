#!/usr/bin/env bash
# Builds the leafraft Docker image FROM scratch, with no registry: `cargo build --release`, then a
# temporary build context with the binary, the shared libraries `ldd` lists (at their absolute
# paths) and an empty /data, then `docker build -t leafraft:latest` (docker/Dockerfile).
#
#   scripts/docker-image.sh            # builds leafraft:latest
#   LEAFRAFT_IMAGE=leafraft:dev scripts/docker-image.sh
#
# The image runs the binary with the host's glibc, so build on the same distribution family the
# image is meant for (any glibc-based x86_64/arm64 Linux works: the libraries travel with it).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${LEAFRAFT_IMAGE:-leafraft:latest}"

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
for tool in cargo docker ldd; do
  command -v "$tool" >/dev/null 2>&1 || { echo "docker-image: $tool is not installed" >&2; exit 1; }
done

echo "docker-image: cargo build --release (reuses the existing release build when it is fresh)"
cargo build --release -p leafraft --bin leafraft
target_dir="$(cargo metadata --format-version 1 --no-deps 2>/dev/null \
  | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
binary="${target_dir:-target}/release/leafraft"
[ -x "$binary" ] || { echo "docker-image: $binary was not built" >&2; exit 1; }

ctx="$(mktemp -d "${TMPDIR:-/tmp}/leafraft-image.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/rootfs/etc" "$ctx/data"
cp docker/Dockerfile "$ctx/Dockerfile"

# The binary without its line tables (the symbols stay, so panics still name functions).
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug -o "$ctx/rootfs/leafraft" "$binary"
else
  cp "$binary" "$ctx/rootfs/leafraft"
fi

# Every library ldd resolves, copied (symlinks followed) to the absolute path it is loaded from:
# `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` and the loader `/lib64/ld-linux-x86-64.so.2 (0x...)`.
ldd_out="$(ldd "$binary" 2>&1)" || true
if grep -q 'not found' <<<"$ldd_out"; then
  echo "docker-image: ldd cannot resolve every library:" >&2
  echo "$ldd_out" >&2
  exit 1
fi
libs="$(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out" | sort -u)"
if [ -z "$libs" ] && ! grep -q 'statically linked\|not a dynamic executable' <<<"$ldd_out"; then
  echo "docker-image: cannot read ldd's answer:" >&2
  echo "$ldd_out" >&2
  exit 1
fi
libc_dir=""
for lib in $libs; do
  mkdir -p "$ctx/rootfs$(dirname "$lib")"
  cp -L "$lib" "$ctx/rootfs$lib"
  case "$lib" in */libc.so.*) libc_dir="$(dirname "$lib")" ;; esac
done
# Host names (peers are `leafraft2:8080` in compose) go through glibc's NSS. Since glibc 2.34
# `files` and `dns` are built into libc; older glibc loads them at run time, which ldd does not show.
if [ -n "$libc_dir" ]; then
  for lib in libnss_files.so.2 libnss_dns.so.2 libresolv.so.2; do
    if [ -e "$libc_dir/$lib" ] && [ ! -e "$ctx/rootfs$libc_dir/$lib" ]; then
      cp -L "$libc_dir/$lib" "$ctx/rootfs$libc_dir/$lib"
    fi
  done
fi
echo "hosts: files dns" >"$ctx/rootfs/etc/nsswitch.conf"

echo "docker-image: staged $(cd "$ctx/rootfs" && find . -type f | sed 's|^\.||' | sort | tr '\n' ' ')"
echo "docker-image: docker build -t $IMAGE"
docker build -q -t "$IMAGE" "$ctx" >/dev/null

size="$(docker image inspect -f '{{.Size}}' "$IMAGE")"
echo "docker-image: built $IMAGE, $(awk -v b="$size" 'BEGIN { printf "%.1f MB (%d bytes)", b / 1000000, b }')"
