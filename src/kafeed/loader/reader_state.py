"""The reader's state (kafeed.loader.state), whichever its source: per shard the next
position, the first not yet taken, the end and what was delivered beyond the next; the
cursor; the counts.

Resume a reader with :meth:`ReaderState.load_state_dict` (exact: the in-flight records are
re-read when it opens) or :meth:`ReaderState.load_plan` (elastic) before it opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafeed.loader.partition import Partition, Ref
from kafeed.loader.resume import PartitionStart, exact_starts, plan_starts
from kafeed.loader.state import check_version, require_keys

STATE_VERSION = 1  # of a reader's state, whichever its source
STATE_KEYS = ("version", "partitions", "rr", "stats")


class ReaderState:
    """State methods for a reader whose shards are :class:`kafeed.loader.partition.Partition`."""

    parts: list[Partition]
    rr: int
    stats: dict[str, int]
    starts: dict[str, PartitionStart]
    _restored: dict[Ref, Any]

    def _opened(self) -> bool:
        raise NotImplementedError

    def restored(self) -> dict[Ref, Any]:
        """The in-flight records of an exact resume, re-read by ``open()`` (decoded; ``None``
        for a record that no longer decodes). Records that are gone are missing."""
        restored, self._restored = self._restored, {}
        return restored

    def state_dict(self) -> dict[str, Any]:
        """Positions per shard, the cursor and the counts (JSON data)."""
        return {"version": STATE_VERSION, "partitions": {p.key: p.entry() for p in self.parts},
                "rr": self.rr, "stats": dict(self.stats)}

    def load_state_dict(self, state: Mapping[str, Any], *, in_flight: Iterable[Ref] = ()) -> None:
        """Resume exactly where ``state`` was taken (call before ``open()``). ``in_flight``:
        the records taken but not yet delivered (whoever holds them names them), re-read
        by position when the reader opens."""
        if self._opened():
            raise RuntimeError("load_state_dict() must come before open()")
        require_keys(state, STATE_KEYS, "reader state")
        check_version(state["version"], STATE_VERSION, "Reader state")
        self.starts = exact_starts(state["partitions"], in_flight)
        self.rr = int(state["rr"])
        self.stats.update(state["stats"])  # in place: a decoder may count into the same dict

    def load_plan(self, plan: Mapping[str, Mapping[str, Any]]) -> None:
        """Resume elastically from per-shard positions (kafeed.loader.state.partition_plan)."""
        if self._opened():
            raise RuntimeError("load_plan() must come before open()")
        self.starts = plan_starts(plan)
