#!/usr/bin/env bash
# The client libraries' local path, per client, in one run against one
# real `leafraft serve` node on a free loopback port:
#   - next_id on a warm handle against the language's own atomic increment, timed in the same run
#     (interleaved rounds, median): Java AtomicLong.getAndIncrement, Go atomic.Int64.Add, Python
#     next() on an itertools.count (the increment the GIL makes atomic); bars: <= 3x for Java and
#     Go, <= 10x for Python;
#   - the IDs/s one thread and 8 threads sustain through next_id, refills over loopback included
#     (ranges of 10,000, the server's most per request), and 8 threads on the bare atomic.
# The Rust client's figures come from `cargo bench -p leafraft-client --bench next_id`
# (docs/benchmarks.md, "The client library").
#   scripts/bench-clients.sh            prints a Markdown table; exits 3 when a bar is missed, 1 when
#                                       a client could not be measured
# Installs nothing (JDK 17, golang-go, python3 as for scripts/clients-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib/processes.sh
source scripts/lib/processes.sh
export GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
export GOCACHE=${GOCACHE:-$root/target/go-cache}

bin=${CARGO_TARGET_DIR:-./target}/release/leafraft
[ -x "$bin" ] || cargo build --release --quiet
for tool in java javac go python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "bench-clients: $tool is missing" >&2; exit 1; }
done

mkdir -p "$work/java"
javac -d "$work/java/classes" $(find clients/java/src/main/java -name '*.java')
javac -d "$work/java/bench" -cp "$work/java/classes" $(find clients/java/src/conformance/java -name '*.java')
(cd clients/go && go build -o "$work/go-bench" ./cmd/leafraft-clientbench)

port=$(free_port)
"$bin" serve --listen "127.0.0.1:$port" --data-dir "$work/node" >"$work/node.log" 2>&1 &
pids+=("$!")
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -sf -XPOST "http://127.0.0.1:$port/v1/tags" -H 'Content-Type: application/json' -d '{"tag":"bench","step":10000}' >/dev/null

results=()
echo "bench-clients: Java" >&2
results+=("$(java -cp "$work/java/classes:$work/java/bench" io.leafraft.client.ClientBench --nodes "127.0.0.1:$port" --tag bench)")
echo "bench-clients: Go" >&2
results+=("$("$work/go-bench" --nodes "127.0.0.1:$port" --tag bench)")
echo "bench-clients: Python" >&2
results+=("$(python3 clients/python/bench.py --nodes "127.0.0.1:$port" --tag bench)")

printf '%s\n' "${results[@]}" >"$work/results.txt"
echo "bench-clients: raw: $(tr '\n' ';' <"$work/results.txt")" >&2
python3 - "$work/results.txt" <<'PY'
import sys
bars = {"java": 3.0, "go": 3.0, "python": 10.0}
baseline_name = {"java": "AtomicLong.getAndIncrement", "go": "atomic.Int64.Add", "python": "next(itertools.count)"}
print("| client | atomic increment | warm next_id | ratio (bar) | 1 thread, IDs/s | 8 threads, IDs/s | 8 threads on the bare atomic, IDs/s | range fetches |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
missed = []
for line in open(sys.argv[1]):
    parts = line.split()
    if not parts:
        continue
    name, v = parts[0], dict(p.split("=") for p in parts[1:])
    ratio, bar = float(v["ratio"]), bars[name]
    if ratio > bar:
        missed.append(name)
    mark = "met" if ratio <= bar else "MISSED"
    extra = f" (a Lock-guarded `+=`: {v['locked_increment_ns']} ns)" if "locked_increment_ns" in v else ""
    print(f"| {name} | {baseline_name[name]}: {v['baseline_ns']} ns{extra} | {v['next_id_ns']} ns | **{ratio:.2f}x** (<= {bar:g}x: {mark}) | "
          f"{float(v['one_thread_ids_s']) / 1e6:.1f} M | {float(v['eight_threads_ids_s']) / 1e6:.1f} M | "
          f"{float(v['atomic_eight_threads_ids_s']) / 1e6:.1f} M | {v['fetches']} |")
if missed:
    print("bench-clients: bar missed by " + ", ".join(missed), file=sys.stderr)
    sys.exit(3)
PY
