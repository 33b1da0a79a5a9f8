"""Segment: one tag's IDs served from a local double buffer, as Leaf's server does it.

Taking an ID is ``next()`` on the current range's ``itertools.count``, which the interpreter runs
as one step under the GIL: two threads never get the same position, and the hot path takes no
lock and does no I/O. When 10 % of the range is used, one background thread fetches the next
range (GET /v1/segment/{tag}/ranges?count=N); when the current one is used up, takers switch to
it. A taker that finds both used up waits for the fetch, at most the client's timeout.

Invariants: every ID handed out lies in a range the server answered to this handle, once; ranges
are used in the order they came, each once, whichever node answered (a failover never makes a
range be served again); after close() the unused IDs are dropped, never handed to anyone.
"""

import itertools
import threading
import time
from typing import List, Optional, Tuple

from . import _plant
from .errors import Closed, LeafraftError, Timeout, TransportError


class _Span:
    __slots__ = ("counter", "end", "load_at", "start")

    def __init__(self, start: int, end: int):
        self.start = start
        self.end = end
        self.load_at = start + (end - start) // 10
        self.counter = itertools.count(start)


_EMPTY = (0, 0)


class Segment:
    """A handle on one tag's IDs, safe to share between threads. ``Client.segment(tag)`` answers
    the same handle for the same tag."""

    def __init__(self, client, tag: str):
        self._client = client
        self.tag = tag
        self._cur = _Span(0, 0)
        self._lock = threading.Lock()
        self._loaded = threading.Condition(self._lock)
        self._next: Optional[_Span] = None
        self._queued: List[Tuple[int, int]] = []
        self._loading = False
        self._loads_done = 0
        self._last_error: Optional[Exception] = None
        self._last_error_at = 0
        self._closed = False
        self._last_count = 0
        self._last_fetch: Optional[float] = None
        self._last_node: Optional[str] = None
        self._last_range = _EMPTY
        self.fetches = 0

    def next_id(self) -> int:
        """One ID: without waiting while the buffer holds IDs, else waiting for the next range at
        most the client's timeout (then Timeout, or the fetch's error)."""
        span = self._cur
        taken = next(span.counter)
        if taken < span.end:
            if taken == span.load_at:
                self._start_load()
            return taken
        return self._slow()

    def try_next_id(self) -> Optional[int]:
        """An ID if the buffer holds one now, else None (a refill may start); never waits."""
        span = self._cur
        taken = next(span.counter)
        if taken < span.end:
            if taken == span.load_at:
                self._start_load()
            return taken
        with self._lock:
            if self._switch_locked():
                span = self._cur
                taken = next(span.counter)
                if taken < span.end:
                    return taken
            self._start_load_locked()
        return None

    def next_ids(self, count: int) -> List[int]:
        """`count` IDs, in the order handed out."""
        return [self.next_id() for _ in range(count)]

    def preload(self) -> None:
        """Starts fetching the first range now, so that the first next_id does not wait."""
        self._start_load()

    def close(self) -> None:
        """Stops handing out IDs; the IDs left in the buffer are dropped (a gap, never served)."""
        with self._lock:
            self._closed = True
            self._cur = _Span(0, 0)
            self._next = None
            self._queued = []
            self._loaded.notify_all()

    def available(self) -> int:
        """IDs left in the current range (for benchmarks and tests); takes none."""
        span = self._cur
        counter = repr(span.counter)  # count(N): the next position, without taking it
        return max(0, span.end - int(counter[6:-1]))

    def _switch_locked(self) -> bool:
        if self._closed or self._next is None:
            return False
        self._cur = self._next
        self._next = None
        if self._queued:
            self._next = _Span(*self._queued.pop(0))
        return True

    def _slow(self, timeout: Optional[float] = None) -> int:
        started = time.monotonic()
        deadline = started + (self._client._timeout if timeout is None else timeout)
        with self._lock:
            arrived = self._loads_done
            while True:
                if self._closed:
                    raise Closed("closed: no more IDs are handed out by this handle")
                span = self._cur
                taken = next(span.counter)
                if taken < span.end:
                    if taken == span.load_at:
                        self._start_load_locked()
                    return taken
                if self._switch_locked():
                    continue
                if self._last_error is not None and self._last_error_at > arrived and not self._loading:
                    raise self._last_error
                self._start_load_locked()
                if self._next is not None:
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    last = str(self._last_error) if self._last_error else "the next range did not come"
                    raise Timeout(time.monotonic() - started, last)
                self._loaded.wait(remaining)

    def _start_load(self) -> None:
        with self._lock:
            self._start_load_locked()

    def _start_load_locked(self) -> None:
        if self._loading or self._next is not None or self._closed:
            return
        if self._queued:
            self._next = _Span(*self._queued.pop(0))
            return
        self._loading = True
        threading.Thread(target=self._load, name=f"leafraft-refill-{self.tag}", daemon=True).start()

    def _next_count_locked(self) -> int:
        """Leaf's dynamic step: lasted under the configured duration, double; over twice it, half."""
        low, high, lasting = self._client._range_min, self._client._range_max, self._client._range_lasting
        if self._last_fetch is None:
            return low
        step = max(self._last_count, low)
        lasted = time.monotonic() - self._last_fetch
        if lasted < lasting:
            if step * 2 <= high:
                step *= 2
        elif lasted >= 2 * lasting:
            step //= 2
        return min(max(step, low), high)

    def _load(self) -> None:
        with self._lock:
            count = self._next_count_locked()
        self.fetches += 1
        ranges: List[Tuple[int, int]] = []
        node = None
        error: Optional[Exception] = None
        try:
            ranges, node = self._client._fetch_segment_ranges(self.tag, count)
            if not ranges:
                error = TransportError("an empty range answer")
        except LeafraftError as failure:
            error = failure
        except Exception as failure:  # never leave takers waiting on a load that died
            error = TransportError(f"range fetch failed: {failure!r}")
        with self._lock:
            self._loading = False
            self._loads_done += 1
            if error is not None:
                self._last_error, self._last_error_at = error, self._loads_done
            elif not self._closed:
                self._last_error = None
                self._last_count, self._last_fetch = count, time.monotonic()
                if _plant.REUSE_RANGE_AFTER_FAILOVER and self._last_node and node != self._last_node and self._last_range != _EMPTY:
                    # The planted bug (conformance suite only): serve the previous range once more.
                    ranges = [self._last_range] + ranges
                self._last_node, self._last_range = node, ranges[-1]
                self._next = _Span(*ranges[0])
                self._queued.extend(ranges[1:])
            self._loaded.notify_all()
