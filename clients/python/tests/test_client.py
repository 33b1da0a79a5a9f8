"""Unit tests against stand-in nodes on loopback (http.server): local ranges, prefetch, dynamic
step, failover without reuse, no resent writes, pinning, typed errors, bounded timeouts, close."""

import asyncio
import json
import os
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import leafraft  # noqa: E402
from leafraft import _plant  # noqa: E402


class Counter:
    def __init__(self):
        self.next = 1
        self.lock = threading.Lock()

    def take(self, count):
        with self.lock:
            start = self.next
            self.next += count
            return start


class Fake:
    """A stand-in node: /ranges from a counter the fake cluster shares, as leafraft answers."""

    def __init__(self, cluster="000000000000000a", counter=None):
        self.cluster = cluster
        self.counter = counter or Counter()
        self.counts, self.ranges, self.posts = [], 0, 0
        self.refuse, self.hang, self.auth, self.dead = None, False, None, False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("X-Leafraft-Cluster-Id", fake.cluster)
                self.end_headers()
                self.wfile.write(data)

            def error(self, status, code):
                self.answer(status, {"error": {"code": code, "message": "fake " + code}})

            def do_GET(self):
                if fake.dead:  # a killed node: kept-alive connections die too
                    self.close_connection = True
                    return
                fake.auth = self.headers.get("Authorization")
                if fake.hang:
                    time.sleep(3)
                pinned = self.headers.get("X-Leafraft-Cluster-Id")
                if pinned and pinned != fake.cluster:
                    return self.error(409, "CLUSTER_MISMATCH")
                url = urlsplit(self.path)
                if url.path == "/v1/cluster":
                    return self.answer(200, {"node_id": 1, "nodes": {}})
                if url.path.startswith("/v1/segment/") and url.path.endswith("/ranges"):
                    fake.ranges += 1
                    if fake.refuse:
                        return self.error(404 if fake.refuse == "TAG_NOT_FOUND" else 503, fake.refuse)
                    count = int(parse_qs(url.query)["count"][0])
                    fake.counts.append(count)
                    start = fake.counter.take(count)
                    return self.answer(200, {"tag": "t", "ranges": [{"start": str(start), "end": str(start + count)}]})
                return self.error(404, "NOT_FOUND")

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if fake.hang:
                    time.sleep(3)
                fake.posts += 1
                self.answer(201, {"tag": "t"})

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that gave up on a hanging answer

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.addr = "127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.dead = True
        self.server.shutdown()
        self.server.server_close()


def eventually(test, what, check):
    for _ in range(200):
        if check():
            return
        time.sleep(0.01)
    test.fail("never: " + what)


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.fakes, self.clients = [], []

    def tearDown(self):
        for client in self.clients:
            client.close()
        for fake in self.fakes:
            fake.stop()

    def fake(self, **kwargs):
        fake = Fake(**kwargs)
        self.fakes.append(fake)
        return fake

    def client(self, *fakes, **kwargs):
        kwargs.setdefault("timeout", 2.0)
        nodes = [f if isinstance(f, str) else f.addr for f in fakes]
        client = leafraft.Client(nodes, discover=False, **kwargs)
        self.clients.append(client)
        return client

    def test_ids_come_from_the_local_range_and_the_next_is_fetched_at_10_percent(self):
        node = self.fake()
        client = self.client(node, range_min=100, range_max=100)
        segment = client.segment("t")
        self.assertEqual(segment.next_id(), 1)
        segment.next_ids(10)
        eventually(self, "the next range in the background", lambda: node.ranges == 2)
        self.assertEqual(segment.next_ids(189)[-1], 200)
        self.assertIs(client.segment("t"), segment)

    def test_the_range_size_follows_leafs_dynamic_step(self):
        node = self.fake()
        client = self.client(node, range_min=100, range_max=400, range_lasting=3600)
        client.segment("t").next_ids(100 + 200 + 400 + 10)
        self.assertEqual(node.counts[:4], [100, 200, 400, 400])

    def test_a_failed_node_is_skipped_and_no_range_is_served_twice(self):
        counter = Counter()
        a, b = self.fake(counter=counter), self.fake(counter=counter)
        client = self.client(a, b, range_min=50, range_max=50)
        seen = set()

        def take(n):
            for _ in range(n):
                taken = client.next_id("t")
                self.assertNotIn(taken, seen)
                seen.add(taken)

        take(60)
        a.refuse = "NOT_READY"
        take(200)
        a.stop()
        self.fakes.remove(a)
        take(200)
        self.assertGreater(b.ranges, 0)

    def test_the_planted_bug_serves_a_range_twice_after_a_failover(self):
        _plant.REUSE_RANGE_AFTER_FAILOVER = True
        try:
            counter = Counter()
            a, b = self.fake(counter=counter), self.fake(counter=counter)
            client = self.client(a, b, range_min=50, range_max=50)
            taken = []
            for i in range(300):
                if i == 60:
                    a.stop()
                    self.fakes.remove(a)
                taken.append(client.next_id("t"))
            self.assertLess(len(set(taken)), len(taken), "the planted switch did not reuse a range")
        finally:
            _plant.REUSE_RANGE_AFTER_FAILOVER = False

    def test_a_write_is_not_sent_again_after_an_unknown_outcome(self):
        a, b = self.fake(), self.fake()
        a.hang = True
        client = self.client(a, b, timeout=0.5)
        with self.assertRaises(leafraft.LeafraftError):
            client.create_tag_if_missing("t")
        self.assertEqual(b.posts, 0)
        dead = a.addr
        a.hang = False
        a.stop()
        self.fakes.remove(a)
        self.assertTrue(self.client(dead, b).create_tag_if_missing("t", step=10))
        self.assertEqual(b.posts, 1)

    def test_the_cluster_is_pinned_on_first_contact(self):
        counter = Counter()
        a, other = self.fake(counter=counter), self.fake(cluster="000000000000000b", counter=counter)
        client = self.client(a, other, range_min=10, range_max=10)
        client.next_id("t")
        self.assertEqual(client.cluster_id, 0xA)
        a.cluster = "000000000000000c"
        started = time.monotonic()
        with self.assertRaises(leafraft.ClusterMismatch):
            client.segment("t").next_ids(20)
        self.assertLess(time.monotonic() - started, 1.0)
        wrong = self.client(other, cluster_id="000000000000000a")
        with self.assertRaises(leafraft.ClusterMismatch) as caught:
            wrong.monotonic_id("m")
        self.assertEqual(caught.exception.code, leafraft.ErrorCode.CLUSTER_MISMATCH)

    def test_server_codes_are_typed_errors_and_timeouts_are_bounded(self):
        node = self.fake()
        node.refuse = "TAG_NOT_FOUND"
        with self.assertRaises(leafraft.TagNotFound) as caught:
            self.client(node).next_id("nope")
        self.assertEqual((caught.exception.status, caught.exception.code), (404, leafraft.ErrorCode.TAG_NOT_FOUND))
        node.refuse, node.hang = None, True
        slow = self.client(node, timeout=0.3)
        started = time.monotonic()
        with self.assertRaises(leafraft.Timeout):
            slow.monotonic_id("m")
        with self.assertRaises(TimeoutError):
            slow.next_id("t")
        self.assertLess(time.monotonic() - started, 2.0)
        transient = {c for c in leafraft.ErrorCode if c.transient}
        self.assertEqual({c.value for c in transient}, {
            "NOT_READY", "SEGMENTS_NOT_READY", "CLOCK_BACKWARDS", "WORKER_UNAVAILABLE", "NO_LEADER",
            "SECOND_EXHAUSTED", "CLOCK_AHEAD", "CLOCK_UNCHECKED", "MEMBERS_BEHIND"})
        self.assertEqual(len(leafraft.ErrorCode), 26)
        unknown = leafraft.errors.api_error(409, "SOMETHING_NEW", "x")
        self.assertEqual(unknown.code, "SOMETHING_NEW")

    def test_close_drops_the_unused_ids(self):
        client = self.client(self.fake())
        client.next_id("t")
        client.close()
        with self.assertRaises(leafraft.Closed):
            client.next_id("t")

    def test_monotonic_ids_are_never_cached_and_the_token_is_sent(self):
        node = self.fake()
        client = self.client(node, token="s3cret")
        ids = [client.monotonic_id("m") for _ in range(3)]
        self.assertEqual(node.ranges, 3)
        self.assertEqual(ids, sorted(ids))
        self.assertEqual(node.auth, "Bearer s3cret")

    def test_concurrent_takers_never_share_an_id(self):
        # The stand-in node shares this process's GIL with 8 busy takers: give its answers time.
        client = self.client(self.fake(), range_min=1000, range_max=10000, timeout=20)
        results = [[] for _ in range(8)]

        def take(i):
            results[i] = client.segment("t").next_ids(5000)

        threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        every = [i for ids in results for i in ids]
        self.assertEqual(len(every), 40000)
        self.assertEqual(len(set(every)), 40000)

    def test_the_asyncio_client(self):
        node = self.fake()

        async def main():
            async with leafraft.AsyncClient([node.addr], discover=False, range_min=100, range_max=100) as client:
                ids = await client.segment("t").next_ids(250)
                self.assertEqual(len(set(ids)), 250)
                self.assertEqual(await client.monotonic_id("m") > ids[-1], True)
                node.refuse = "TAG_NOT_FOUND"
                with self.assertRaises(leafraft.TagNotFound):
                    await client.next_id("other")

        asyncio.run(main())

    def test_snowflake_ids_come_apart_locally(self):
        snowflake = ((1_700_000_000_000 - 1288834974657) << 22) | (7 << 12) | 42
        self.assertEqual(leafraft.LEAF_LAYOUT.decode(snowflake), (1_700_000_000_000, 7, 42))


if __name__ == "__main__":
    unittest.main()
