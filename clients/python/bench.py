#!/usr/bin/env python3
"""The Python client's local path for scripts/bench-clients.sh: Segment.next_id on a warm handle
against the interpreter's own atomic increment (next() on an itertools.count, what the GIL makes
atomic; a Lock-guarded += is printed too), same run, interleaved rounds, median; and the IDs/s
one thread and 8 sustain, refills from a real node included.

    python3 bench.py --nodes H:P --tag T
"""

import argparse
import itertools
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import leafraft  # noqa: E402

ROUNDS, N, CHUNK = 7, 1_000_000, 2_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", required=True)
    parser.add_argument("--tag", required=True)
    args = parser.parse_args()
    client = leafraft.Client([args.nodes], discover=False, range_min=10_000, range_max=10_000)
    segment = client.segment(args.tag)
    segment.next_ids(2_000)
    counter = itertools.count()
    lock, locked = threading.Lock(), [0]
    baseline, warm, with_lock = [], [], []
    take = segment.next_id
    step = counter.__next__
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(N):
            step()
        baseline.append((time.perf_counter() - started) / N * 1e9)
        started = time.perf_counter()
        for _ in range(N // 4):
            with lock:
                locked[0] += 1
        with_lock.append((time.perf_counter() - started) / (N // 4) * 1e9)
        timed, spent = 0, 0.0
        while timed < N:
            if segment.available() > CHUNK + 1:
                started = time.perf_counter()
                for _ in range(CHUNK):
                    take()
                spent += time.perf_counter() - started
                timed += CHUNK
            else:
                take()
        warm.append(spent / timed * 1e9)

    def sustained(workers: int, function) -> float:
        total = [0] * workers
        deadline = time.monotonic() + 2.0

        def work(i: int) -> None:
            mine = 0
            while time.monotonic() < deadline:
                for _ in range(1000):
                    function()
                mine += 1000
            total[i] = mine

        threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sum(total) / (time.monotonic() - started)

    one = sustained(1, take)
    eight = sustained(8, take)
    atomic_eight = sustained(8, step)
    b, w = statistics.median(baseline), statistics.median(warm)
    print(f"python baseline_ns={b:.2f} next_id_ns={w:.2f} ratio={w / b:.2f} one_thread_ids_s={one:.0f} "
          f"eight_threads_ids_s={eight:.0f} atomic_eight_threads_ids_s={atomic_eight:.0f} "
          f"locked_increment_ns={statistics.median(with_lock):.2f} fetches={segment.fetches}")
    client.close()


if __name__ == "__main__":
    main()
