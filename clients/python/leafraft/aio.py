"""The asyncio client.

The standard library has no asyncio HTTP client, and this package takes no dependency, so the
asyncio client shares the sync client's transport (one implementation of failover, pinning and
"never resend a write") and runs each request in a small thread pool of its own, off the event
loop. Taking a segment ID from the local range never leaves the event loop: it is the same one
``next()`` as in the sync client. Every call is bounded by the client's timeout; cancelling an
awaiting call returns at once (the request in the pool ends within its attempt timeout).
"""

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List

from .client import Client


class AsyncSegment:
    """A tag's IDs from the local range, for coroutines."""

    def __init__(self, segment, client: "AsyncClient"):
        self._segment = segment
        self._client = client
        self.tag = segment.tag

    async def next_id(self) -> int:
        span = self._segment._cur
        taken = next(span.counter)
        if taken < span.end:
            if taken == span.load_at:
                self._segment._start_load()
            return taken
        return await self._client._run(self._segment._slow)

    async def next_ids(self, count: int) -> List[int]:
        return [await self.next_id() for _ in range(count)]

    def try_next_id(self):
        return self._segment.try_next_id()

    def preload(self) -> None:
        self._segment.preload()

    def close(self) -> None:
        self._segment.close()


class AsyncClient:
    """``async with AsyncClient([...]) as client: id = await client.next_id("order")``.
    Takes the same arguments as :class:`leafraft.Client`."""

    def __init__(self, nodes, *, max_workers: int = 8, **settings):
        self._sync = Client(nodes, **settings)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="leafraft-aio")
        self._segments: Dict[str, AsyncSegment] = {}

    async def _run(self, function, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(function, *args, **kwargs))

    def segment(self, tag: str) -> AsyncSegment:
        segment = self._segments.get(tag)
        if segment is None:
            segment = self._segments.setdefault(tag, AsyncSegment(self._sync.segment(tag), self))
        return segment

    async def next_id(self, tag: str) -> int:
        return await self.segment(tag).next_id()

    async def monotonic_id(self, tag: str) -> int:
        return await self._run(self._sync.monotonic_id, tag)

    async def monotonic_range(self, tag: str, count: int = 1) -> range:
        return await self._run(self._sync.monotonic_range, tag, count)

    async def snowflake(self, count: int = 1) -> List[int]:
        return await self._run(self._sync.snowflake, count)

    async def snowflake_id(self) -> int:
        return await self._run(self._sync.snowflake_id)

    async def timeseq(self, namespace: str, shard: int, count: int = 1) -> List[int]:
        return await self._run(self._sync.timeseq, namespace, shard, count)

    async def timeseq_strings(self, namespace: str, shard: int, count: int = 1, prefix: str = "") -> List[str]:
        return await self._run(self._sync.timeseq_strings, namespace, shard, count, prefix)

    async def decode_snowflake(self, snowflake_id: int) -> Dict[str, Any]:
        return await self._run(self._sync.decode_snowflake, snowflake_id)

    async def decode_timeseq(self, namespace: str, timeseq_id) -> Dict[str, Any]:
        return await self._run(self._sync.decode_timeseq, namespace, timeseq_id)

    async def create_tag_if_missing(self, tag: str, **fields) -> bool:
        return await self._run(self._sync.create_tag_if_missing, tag, **fields)

    async def create_namespace_if_missing(self, namespace: str, **fields) -> bool:
        return await self._run(self._sync.create_namespace_if_missing, namespace, **fields)

    async def get_tag(self, tag: str) -> Dict[str, Any]:
        return await self._run(self._sync.get_tag, tag)

    async def cluster(self) -> Dict[str, Any]:
        return await self._run(self._sync.cluster)

    @property
    def cluster_id(self):
        return self._sync.cluster_id

    async def close(self) -> None:
        """Closes every segment handle (unused IDs are dropped: gaps) and the connections."""
        self._sync.close()
        self._pool.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
