#!/usr/bin/env python3
"""The Python client's program for scripts/clients-test.sh (same arguments and lines as every
client's; see clients/go/cmd/leafraft-conformance for the protocol).

LEAFRAFT_CONFORMANCE_PLANT=reuse-range turns on the planted bug (leafraft._plant), read here only.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import leafraft  # noqa: E402
from leafraft import _plant  # noqa: E402


def now_micros() -> int:
    return time.time_ns() // 1000


def kind(error) -> str:
    if isinstance(error, leafraft.ApiError):
        return error.code.value if isinstance(error.code, leafraft.ErrorCode) else str(error.code)
    if isinstance(error, leafraft.Timeout):
        return "TIMEOUT"
    if isinstance(error, leafraft.Closed):
        return "CLOSED"
    if error is None:
        return "none"
    return "untyped:" + str(error).replace(" ", "_")


def run(args) -> None:
    client = leafraft.Client(args.nodes.split(","), timeout=5, attempt_timeout=1,
                             range_min=100, range_max=1000, range_lasting=1)
    segment = client.segment(args.tag)
    segments = monotonic = failures = 0
    with open(args.out, "w") as out:
        while not os.path.exists(args.stop):
            batch = []
            for _ in range(50):
                try:
                    batch.append(segment.next_id())
                except leafraft.LeafraftError as error:
                    failures += 1
                    out.write(f"e {kind(error)}\n")
                    break
            segments += len(batch)
            out.write("s " + " ".join(map(str, batch)) + "\n")
            sent = now_micros()
            try:
                taken = client.monotonic_id(args.mono)
            except leafraft.LeafraftError as error:
                failures += 1
                out.write(f"e {kind(error)}\n")
            else:
                monotonic += 1
                out.write(f"m {sent} {now_micros() + 1} {taken}\n")
            time.sleep(0.005)
    client.close()
    print(f"python: segment={segments} monotonic={monotonic} errors={failures} requests={client.http_requests}")


def typed_errors(args) -> None:
    client = leafraft.Client(args.nodes.split(","), timeout=5)
    try:
        client.next_id("conformance-no-such-tag")
        print("unknown-tag none")
    except leafraft.LeafraftError as error:
        print("unknown-tag", kind(error))
    client.close()
    wrong = leafraft.Client(args.nodes.split(","), timeout=5, cluster_id=0x0123456789ABCDEF)
    try:
        wrong.next_id("conformance-no-such-tag")
        print("cluster-mismatch none")
    except leafraft.LeafraftError as error:
        print("cluster-mismatch", kind(error))
    wrong.close()
    hole = leafraft.Client([args.blackhole], timeout=1)
    started = time.monotonic()
    try:
        hole.next_id("anything")
        print("timeout none")
    except leafraft.LeafraftError as error:
        print("timeout", kind(error), int((time.monotonic() - started) * 1000))
    hole.close()


def tls_and_token(args) -> None:
    client = leafraft.Client(args.nodes.split(","), ca_file=args.ca, token=args.token, timeout=5)
    try:
        print("tls ok", len(client.segment(args.tag).next_ids(10)))
    except leafraft.LeafraftError as error:
        print("tls", kind(error))
    client.close()
    anonymous = leafraft.Client(args.nodes.split(","), ca_file=args.ca, timeout=5)
    try:
        anonymous.next_id(args.tag)
        print("unauthorized none")
    except leafraft.LeafraftError as error:
        print("unauthorized", kind(error))
    anonymous.close()


def kinds(args) -> None:
    client = leafraft.Client(args.nodes.split(","), timeout=5)

    def twice(create, *a, **kw):
        # Apart by more than a millisecond: two identical creates within one are answered alike.
        results = []
        for _ in range(2):
            time.sleep(0.01)
            try:
                results.append((str(create(*a, **kw)).lower(), "none"))
            except leafraft.LeafraftError as error:
                results.append(("false", kind(error)))
        return f"{results[0][0]} {results[1][0]} {results[0][1]} {results[1][1]}"

    print("create-tag", twice(client.create_tag_if_missing, args.tag, step=100))
    print("create-namespace", twice(client.create_namespace_if_missing, args.ns))
    try:
        ids = client.snowflake(3)
        if not ids[0] < ids[1] < ids[2]:
            print("snowflake not-increasing", ids)
        else:
            decoded = client.decode_snowflake(ids[0])
            local = leafraft.LEAF_LAYOUT.decode(ids[0])
            same = (decoded["timestamp_ms"], decoded["worker_id"], decoded["sequence"]) == tuple(local)
            print("snowflake ok" if same else f"snowflake decode-differs {decoded} {local}")
    except leafraft.LeafraftError as error:
        print("snowflake", kind(error))
    try:
        longs = client.timeseq(args.ns, 3, 3)
        if not longs[0] < longs[1] < longs[2]:
            print("timeseq not-increasing", longs)
        else:
            decoded = client.decode_timeseq(args.ns, longs[0])
            print("timeseq ok" if decoded["shard"] == 3 else f"timeseq decode {decoded}")
    except leafraft.LeafraftError as error:
        print("timeseq", kind(error))
    try:
        texts = client.timeseq_strings(args.ns, 3, 2, "AB")
        if len(texts) != 2 or not texts[0].startswith("AB") or texts[0] == texts[1]:
            print("timeseq-string unexpected", texts)
        else:
            decoded = client.decode_timeseq(args.ns, texts[0])
            print("timeseq-string ok" if decoded["shard"] == 3 else f"timeseq-string decode {decoded}")
    except leafraft.LeafraftError as error:
        print("timeseq-string", kind(error))
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "errors", "tls", "kinds"])
    for flag in ("nodes", "tag", "mono", "out", "stop", "blackhole", "ca", "token", "ns"):
        parser.add_argument("--" + flag, default="")
    args = parser.parse_args()
    if os.environ.get("LEAFRAFT_CONFORMANCE_PLANT") == "reuse-range":
        _plant.REUSE_RANGE_AFTER_FAILOVER = True
    {"run": run, "errors": typed_errors, "tls": tls_and_token, "kinds": kinds}[args.mode](args)


if __name__ == "__main__":
    main()
