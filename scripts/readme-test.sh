#!/usr/bin/env bash
# Runs the README's ```sh blocks top to bottom, as a new user would, and fails on the first error.
#
#   scripts/readme-test.sh [README.md]
#
# Each block runs in a fresh temporary directory (the user's working directory: data dirs such as
# ./leafraft-data and d1..d4 land there) with `bash -euo pipefail`, the release binary's directory
# first on PATH (as `cargo install --path .` or `export PATH=$PWD/target/release:$PATH` give), and
# `curl` answering as `curl --fail-with-body`: a 4xx/5xx answer (an `{"error":...}` body, or Leaf's
# `Result{id=-N, status=EXCEPTION}`) fails the block like a non-zero exit does.
# - A block that only runs a node in the foreground (`cargo run --release -- serve`, `leafraft
#   serve` without `&`) is started in the background and waited for on /readyz, with a deadline.
# - Nodes a block starts with `&` keep running for the blocks after it; every process a block
#   started is stopped (SIGTERM, then SIGKILL) when the script ends, whatever happens.
# - `<!-- readme-test: skip (why) -->` on the line before a block skips it, printing why.
# The README's ports (8080-8084) must be free; the script says which one is not and stops.
# It runs `cargo build --release` first (a no-op when fresh, ~6.5 min cold on 2 cores); with a
# fresh build the blocks take well under 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
# shellcheck source=lib/ci.sh
. scripts/lib/ci.sh
readme=${1:-README.md}
target=${CARGO_TARGET_DIR:-$repo/target}
ports=(8080 8081 8082 8083 8084)
block_timeout=120

command -v curl >/dev/null 2>&1 || {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null; }
  fi
}
curl --version >/dev/null 2>&1 || cannot_run readme-test "curl is not installed (Debian package curl) and cannot be installed here"
real_curl=$(command -v curl)

for port in "${ports[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "readme-test: port $port is in use; the README's examples need 127.0.0.1:${ports[0]}-${ports[-1]} free" >&2
    exit 1
  fi
done

echo "readme-test: cargo build --release (a no-op when it is fresh; ~6.5 min cold on 2 cores)"
cargo build --release --quiet

work=$(mktemp -d /tmp/leafraft-readme.XXXXXX)
groups=()
cleanup() {
  local status=$?
  for group in "${groups[@]}"; do kill -TERM -- "-$group" 2>/dev/null || true; done
  for group in "${groups[@]}"; do
    for _ in $(seq 1 150); do kill -0 -- "-$group" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$group" 2>/dev/null || true
  done
  if [ "$status" = 0 ]; then rm -rf "$work"; else echo "readme-test: outputs kept in $work" >&2; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What the blocks see: the release binary on PATH, curl that fails on an error answer, and the
# repository's scripts where a clone has them (scripts/cluster.sh cds to the repository itself,
# so its data goes to this directory through LEAFRAFT_CLUSTER_DIR).
mkdir -p "$work/bin" "$work/home"
cat >"$work/bin/curl" <<EOF
#!/usr/bin/env bash
# curl --fail-with-body, unless the command already asks for --fail (curl refuses both).
for arg in "\$@"; do
  case "\$arg" in
    --fail | --fail-with-body) exec "$real_curl" "\$@" ;;
    --*) ;;
    -*f*) exec "$real_curl" "\$@" ;;
  esac
done
exec "$real_curl" --fail-with-body "\$@"
EOF
chmod +x "$work/bin/curl"
ln -s "$repo/scripts" "$work/scripts"
export PATH="$work/bin:$target/release:$PATH"
export LEAFRAFT_CLUSTER_DIR="$work/cluster-data"
export CARGO_TARGET_DIR="$target"
export REPO="$repo"
unset LEAFRAFT_SERVER LEAFRAFT_SECRET LEAFRAFT_TOKEN LEAFRAFT_CA

# Splits the README into blocks/NN.sh (and NN.skip with the reason for skipped ones).
mkdir -p "$work/blocks"
awk -v dir="$work/blocks" '
  /^<!-- readme-test: skip/ { skip = $0; sub(/^<!-- readme-test: skip *\(?/, "", skip); sub(/\)? *-->.*$/, "", skip); next }
  /^```sh$/ && !inside { inside = 1; n++; file = sprintf("%s/%02d.sh", dir, n); printf "" > file
                         if (skip != "") { print skip > sprintf("%s/%02d.skip", dir, n) } ; skip = ""; next }
  /^```/ && inside { inside = 0; close(file); next }
  inside { print >> file; next }
  /[^[:space:]]/ { skip = "" }
' "$readme"
count=$(find "$work/blocks" -name '*.sh' | wc -l)
[ "$count" -gt 0 ] || { echo "readme-test: no \`\`\`sh blocks in $readme" >&2; exit 1; }

# `host:port` a foreground serve command listens on (the default, or its --listen).
listen_of() {
  local addr
  addr=$(awk 'match($0, /--listen[ =][^ ]+/) { print substr($0, RSTART + 9, RLENGTH - 9); exit }' "$1")
  echo "${addr:-127.0.0.1:8080}"
}

run_block() {
  local block=$1 name log started status
  name=$(basename "$block" .sh)
  log="$work/blocks/$name.log"
  if [ -f "$work/blocks/$name.skip" ]; then
    echo "== block $name: skipped ($(cat "$work/blocks/$name.skip"))"
    return
  fi
  echo "== block $name:"
  sed 's/^/   $ /' "$block"
  if grep -Eq '(^|[[:space:]])serve([[:space:]]|$)' "$block" && ! grep -q '&' "$block" \
    && [ "$(grep -cv '^[[:space:]]*\(#.*\)\?$' "$block")" = 1 ]; then
    # A node in the foreground: run it in the background and wait until it is ready.
    local addr
    addr=$(listen_of "$block")
    sed -i 's/^cargo run /cargo run --manifest-path "$REPO\/Cargo.toml" /' "$block"
    (cd "$work" && exec setsid bash -euo pipefail "$block" >"$log" 2>&1 </dev/null) &
    groups+=("$!")
    started=$(date +%s)
    until "$real_curl" -sf "http://$addr/readyz" >/dev/null 2>&1; do
      if ! kill -0 "$!" 2>/dev/null || [ $(($(date +%s) - started)) -ge 60 ]; then
        echo "readme-test: block $name: no node ready at $addr within 60 s; its output:" >&2
        tail -n 20 "$log" >&2
        exit 1
      fi
      sleep 0.2
    done
    echo "   (running in the background; ready at $addr)"
    return
  fi
  (cd "$work" && exec setsid timeout "$block_timeout" bash -euo pipefail "$block" >"$log" 2>&1 </dev/null) &
  local pid=$!
  groups+=("$pid")
  status=0
  wait "$pid" || status=$?
  head -n 40 "$log" | sed 's/^/   /'
  [ "$(wc -l <"$log")" -le 40 ] || echo "   ... ($(wc -l <"$log") lines in all: $log)"
  if [ "$status" != 0 ]; then
    local why=""
    [ "$status" = 124 ] && why=": timed out after ${block_timeout} s"
    [ "$status" = 22 ] && why=": curl got an HTTP error answer"
    echo >&2
    echo "readme-test: block $name failed (exit $status$why); its last lines:" >&2
    tail -n 15 "$log" >&2
    echo >&2
    exit 1
  fi
}

started_all=$(date +%s)
for block in "$work"/blocks/*.sh; do
  run_block "$block"
done
echo "readme-test: all $count blocks of $readme ran without an error in $(($(date +%s) - started_all)) s"
