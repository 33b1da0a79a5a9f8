# Sourced by the benchmark scripts (from the repository root): a scratch directory `work` and the
# PIDs in `pids` (append every process started), both cleaned up when the script exits, and
# `free_port`, a free loopback port.
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
