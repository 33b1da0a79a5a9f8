"""A Python client of leafraft, the distributed ID service.

    import leafraft

    client = leafraft.Client(["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"])
    client.create_tag_if_missing("order", step=1000)
    order_id = client.next_id("order")     # from the local range: no request while it lasts
    client.close()                         # unused IDs are dropped: a gap, never served again

What is guaranteed:

- No ID is handed out twice: every ID comes from a range the cluster committed to this request
  alone; each range is used once, by one handle, in the order it came, whichever node answered
  (a failover never makes a range be served again); each ID of it goes to one caller.
- IDs are not in a global order: two processes (or one after a failover) interleave ranges.
  Monotonic tags (``monotonic_id``) and snowflake and time-sequence IDs are never cached: each
  call is one request.
- Gaps: ``close()`` drops the unused IDs of the current and next range; never served again.
- No unbounded wait: a call that cannot be served within ``timeout`` raises ``leafraft.Timeout``,
  or the server's own error (``leafraft.ApiError`` with its ``code``; one subclass per code,
  e.g. ``leafraft.TagNotFound``) as soon as one is definite.
- Only what is safe to repeat is repeated on another node: ID requests and reads. A write goes
  to a second node only when the first refused the connection or is of another cluster.
- Pinning: the cluster ID (``X-Leafraft-Cluster-Id``) is learnt from the first node that answers
  (or given as ``cluster_id``) and sent with every request; a node of another cluster is never
  served from (``leafraft.ClusterMismatch``).
"""

from . import errors
from .aio import AsyncClient, AsyncSegment
from .client import MAX_PER_REQUEST, Client
from ._segment import Segment
from .decode import LEAF_LAYOUT, Layout, SnowflakeParts
from .errors import (ERROR_CLASSES, ApiError, Closed, ConfigError, ErrorCode, LeafraftError, Timeout,
                     TransportError, code_of)

globals().update({cls.__name__: cls for cls in ERROR_CLASSES.values()})

__version__ = "0.3.0"
__all__ = [
    "AsyncClient", "AsyncSegment", "Client", "Segment", "MAX_PER_REQUEST", "Layout", "LEAF_LAYOUT",
    "SnowflakeParts", "ApiError", "Closed", "ConfigError", "ErrorCode", "LeafraftError", "Timeout",
    "TransportError", "code_of", "errors",
] + [cls.__name__ for cls in ERROR_CLASSES.values()]
