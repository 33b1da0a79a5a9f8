"""The thread-safe sync client."""

import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import quote

from ._segment import Segment
from ._transport import NEVER, SAFE, Transport
from .errors import ApiError, ConfigError, ErrorCode, TransportError

#: The server's most IDs per request.
MAX_PER_REQUEST = 10_000


def _id(text) -> int:
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise TransportError(f"not a decimal ID: {text!r}") from None
    if value < 0:
        raise TransportError(f"not a decimal ID: {text!r}")
    return value


def _path_part(text: str) -> str:
    return quote(str(text), safe="")


class Client:
    """A client of one leafraft cluster, safe to share between threads; create one per process.

    ``nodes``: "host:port" or "http(s)://host:port"; with ``discover`` (the default) the members
    /v1/cluster names are added. ``token``: sent as ``Authorization: Bearer``. ``ca_file`` or
    ``ca_pem``: the CA that signs the nodes' certificates (only it is trusted; bare host:port
    means https). ``timeout``: the most one call may take, failover and waiting for a range
    included [10 s]; ``attempt_timeout``: one HTTP attempt on one node [2 s]. ``cluster_id``:
    pin a cluster (int, or hex as /v1/cluster shows it); by default learnt on first contact.
    ``range_min``/``range_max``/``range_lasting``: Leaf's dynamic step for local ranges
    [1,000 / 10,000 / 60 s].
    """

    def __init__(
        self,
        nodes: Sequence[str],
        *,
        token: Optional[str] = None,
        ca_file: Optional[str] = None,
        ca_pem: Optional[str] = None,
        timeout: float = 10.0,
        attempt_timeout: float = 2.0,
        discover: bool = True,
        cluster_id=None,
        range_min: int = 1000,
        range_max: int = MAX_PER_REQUEST,
        range_lasting: float = 60.0,
    ):
        if isinstance(nodes, str):
            nodes = [n for n in nodes.split(",") if n]
        if isinstance(cluster_id, str):
            try:
                cluster_id = int(cluster_id, 16)
            except ValueError:
                raise ConfigError(f"a cluster ID is hex, got {cluster_id!r}") from None
        self._timeout = float(timeout)
        self._range_min = max(1, min(int(range_min), MAX_PER_REQUEST))
        self._range_max = max(self._range_min, min(int(range_max), MAX_PER_REQUEST))
        self._range_lasting = float(range_lasting)
        self._transport = Transport(list(nodes), token, ca_file, ca_pem, self._timeout, attempt_timeout, discover, cluster_id)
        self._segments: Dict[str, Segment] = {}
        # Segment tags whose /ranges answered MODE_MISMATCH (scrambled): read from lists since.
        self._listed: set = set()
        self._lock = threading.Lock()
        self._closed = False

    # --- segment IDs, from local ranges

    def segment(self, tag: str) -> Segment:
        """The handle on `tag`'s IDs; every call for the same tag answers the same one."""
        segment = self._segments.get(tag)
        if segment is not None:
            return segment
        with self._lock:
            segment = self._segments.get(tag)
            if segment is None:
                segment = Segment(self, tag)
                if self._closed:
                    segment.close()
                self._segments[tag] = segment
            return segment

    def next_id(self, tag: str) -> int:
        """One ID of `tag` from its local range: ``client.segment(tag).next_id()``."""
        return self.segment(tag).next_id()

    def _fetch_ranges(self, tag: str, count: int, timeout: Optional[float] = None) -> Tuple[List[Tuple[int, int]], str]:
        path = f"/v1/segment/{_path_part(tag)}/ranges?count={count}"
        answer, node = self._transport.call("GET", path, repeat=SAFE, timeout=timeout)
        try:
            ranges = [(_id(r["start"]), _id(r["end"])) for r in answer["ranges"]]
        except (KeyError, TypeError):
            raise TransportError(f"{path}: unexpected answer") from None
        if any(end <= start for start, end in ranges) or sum(end - start for start, end in ranges) > count:
            raise TransportError(f"{path}: ranges that do not fit the request: {ranges}")
        return ranges, node

    def _fetch_segment_ranges(self, tag: str, count: int) -> Tuple[List[Tuple[int, int]], str]:
        """`count` IDs of the segment `tag` for a handle to cache, as ranges. A scrambled tag's IDs
        form no ranges (its /ranges answers MODE_MISMATCH): they come from Leaf's list path, each
        as a range of one, served once like any range."""
        if tag not in self._listed:
            try:
                return self._fetch_ranges(tag, count)
            except ApiError as error:
                if error.code != ErrorCode.MODE_MISMATCH:
                    raise
                self._listed.add(tag)
        path = f"/v1/segment/{_path_part(tag)}?count={count}"
        answer, node = self._transport.call("GET", path, repeat=SAFE)
        try:
            ids = [_id(text) for text in answer["ids"]]
        except (KeyError, TypeError):
            raise TransportError(f"{path}: unexpected answer") from None
        if len(ids) > count or len(set(ids)) != len(ids):
            raise TransportError(f"{path}: IDs that do not fit the request: {ids}")
        return [(i, i + 1) for i in ids], node

    # --- pass-through IDs: never cached

    def monotonic_range(self, tag: str, count: int = 1) -> range:
        """`count` (1 to 10,000) consecutive IDs of the monotonic `tag`, larger than every ID of
        the tag any client received before this call. One request; nothing is kept."""
        ranges, _ = self._fetch_ranges(tag, count)
        if len(ranges) != 1 or ranges[0][1] - ranges[0][0] != count:
            raise TransportError(f"{tag}: not one range of {count} IDs: {ranges}")
        return range(*ranges[0])

    def monotonic_id(self, tag: str) -> int:
        """One ID of the monotonic `tag`, above every ID of it any client received before."""
        return self.monotonic_range(tag, 1).start

    def snowflake(self, count: int = 1) -> List[int]:
        """`count` (1 to 10,000) snowflake IDs in one request (they carry time: never cached)."""
        answer, _ = self._transport.call("GET", f"/v1/snowflake?count={count}")
        return [_id(text) for text in answer["ids"]]

    def snowflake_id(self) -> int:
        return self.snowflake(1)[0]

    def timeseq(self, namespace: str, shard: int, count: int = 1) -> List[int]:
        """`count` long-form time-sequence IDs of `namespace` for `shard`."""
        answer, _ = self._transport.call("GET", f"/v1/timeseq/{_path_part(namespace)}?shard={shard}&count={count}")
        return [_id(text) for text in answer["ids"]]

    def timeseq_strings(self, namespace: str, shard: int, count: int = 1, prefix: str = "") -> List[str]:
        """`count` string-form IDs (prefix + yyyyMMddHHmmss + sequence + shard)."""
        if not all(c.isascii() and (c.isalnum() or c in "-_") for c in prefix):
            raise ConfigError(f"a prefix is letters, digits, - and _ only, got {prefix!r}")
        path = f"/v1/timeseq/{_path_part(namespace)}?shard={shard}&count={count}&format=string&prefix={prefix}"
        answer, _ = self._transport.call("GET", path)
        return [str(text) for text in answer["ids"]]

    def decode_snowflake(self, snowflake_id: int) -> Dict[str, Any]:
        """A snowflake ID taken apart by a server, with the cluster's layout."""
        return self._transport.call("GET", f"/v1/snowflake/decode/{int(snowflake_id)}")[0]

    def decode_timeseq(self, namespace: str, timeseq_id) -> Dict[str, Any]:
        """A long or string-form time-sequence ID taken apart by a server."""
        return self._transport.call("GET", f"/v1/timeseq/{_path_part(namespace)}/decode/{_path_part(timeseq_id)}")[0]

    # --- what a service needs at start

    def create_tag_if_missing(self, tag: str, *, step: Optional[int] = None, max_id: Optional[int] = None,
                              description: Optional[str] = None, mode: Optional[str] = None) -> bool:
        """Creates the tag unless it exists; True when this call created it. Sent once (to a
        second node only when the first refused the connection): when the outcome is unknown the
        error says so, and calling again is safe (TAG_EXISTS then answers False). Two identical
        creates within one millisecond are one create to the server: both answer True (the second
        changes nothing)."""
        body: Dict[str, Any] = {"tag": tag}
        if step is not None:
            body["step"] = step
        if max_id is not None:
            body["max_id"] = str(max_id)
        if description is not None:
            body["description"] = description
        if mode is not None:
            body["mode"] = mode
        return self._create("/v1/tags", body, ErrorCode.TAG_EXISTS)

    def create_namespace_if_missing(self, namespace: str, **fields) -> bool:
        """Creates the time-sequence namespace unless it exists (epoch, time_zone, shard_bits,
        seq_bits, description as keyword arguments); True when this call created it."""
        return self._create("/v1/timeseq", {"namespace": namespace, **fields}, ErrorCode.NAMESPACE_EXISTS)

    def _create(self, path: str, body: Dict[str, Any], exists: ErrorCode) -> bool:
        try:
            self._transport.call("POST", path, body, repeat=NEVER)
        except ApiError as error:
            if error.code == exists:
                return False
            raise
        return True

    def get_tag(self, tag: str) -> Dict[str, Any]:
        return self._transport.call("GET", f"/v1/tags/{_path_part(tag)}")[0]

    def cluster(self) -> Dict[str, Any]:
        """/v1/cluster from the first node that answers."""
        return self._transport.call("GET", "/v1/cluster")[0]

    # --- the client itself

    @property
    def cluster_id(self) -> Optional[int]:
        """The pinned cluster: given, or learnt from the first node that answered (else None)."""
        return self._transport.cluster_id or None

    @property
    def nodes(self) -> List[str]:
        return list(self._transport.nodes)

    @property
    def http_requests(self) -> int:
        return self._transport.requests

    def close(self) -> None:
        """Closes every segment handle (their unused IDs are dropped: gaps) and the connections."""
        with self._lock:
            self._closed = True
            segments = list(self._segments.values())
        for segment in segments:
            segment.close()
        self._transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
