"""Taking a snowflake ID apart locally, once the layout is known (the server's decode endpoints
are ``Client.decode_snowflake`` and ``Client.decode_timeseq``)."""

from dataclasses import dataclass
from typing import NamedTuple


class SnowflakeParts(NamedTuple):
    timestamp_ms: int
    worker: int
    sequence: int


@dataclass(frozen=True)
class Layout:
    """Milliseconds since ``epoch_ms`` in ``time_bits``, then the worker, then the sequence."""

    epoch_ms: int = 1288834974657
    time_bits: int = 41
    worker_bits: int = 10
    sequence_bits: int = 12

    def decode(self, snowflake_id: int) -> SnowflakeParts:
        sequence = snowflake_id & ((1 << self.sequence_bits) - 1)
        worker = (snowflake_id >> self.sequence_bits) & ((1 << self.worker_bits) - 1)
        elapsed = (snowflake_id >> (self.worker_bits + self.sequence_bits)) & ((1 << self.time_bits) - 1)
        return SnowflakeParts(elapsed + self.epoch_ms, worker, sequence)


#: Leaf's and Twitter's layout, leafraft's default.
LEAF_LAYOUT = Layout()
