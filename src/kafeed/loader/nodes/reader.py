"""The one reader: a source's shards, their records handed out in a deterministic order.

A source (kafeed.loader.sources.source: Kafka partitions, local files) says which shards this
reader owns, where each starts, and fills their queues. The reader hands the records out:
*interleaved*, one record per shard (sorted by key) in turn, or *in turn*, each shard to its
end and then the next, as the source says. In bounded mode it waits for a shard that is
behind, so the order depends only on the data; in unbounded mode a shard caught up at the
end of its log is skipped for that turn.

The reader tracks, per shard, what is in flight (taken but not yet delivered) and what was
delivered out of order, which is what its state needs.
In-flight records' timestamps are kept for the latency metric (not state).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from kafeed.errors import SchemaError
from kafeed.loader.nodes.node import NODE_VERSIONS, check_node
from kafeed.loader.nodes.record_kinds import KINDS
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.partition import Item, Partition, Ref
from kafeed.loader.sources.source import Source
from kafeed.loader.state.resume import PartitionStart, exact_starts, plan_starts

STATE_KEYS = ("partitions", "rr", "stats")  # besides "version" (kafeed.loader.nodes.node)


class ShardReader:
    """Reader ``index`` of ``count`` over ``source``, the first node of a reader's path
    (kafeed.loader.nodes.node). Resume it with :meth:`reset` (exact) or :meth:`load_plan`
    (elastic) before :meth:`open`.

    Its state (:meth:`state`): ``{"version": 1, "partitions": {"<topic or source
    name>:<shard>": {"next", "read", "end", "delivered"}}, "rr": whose turn, "stats": counts}``.
    """

    def __init__(self, settings: LoaderSettings, source: Source, *, index: int, count: int) -> None:
        self.settings = settings
        self.source = source
        self.index = index
        self.count = count
        self.starts: dict[str, PartitionStart] = {}
        self.known: dict[str, int] = {}  # per topic, the highest shard the loaded state names
        self.parts: list[Partition] = []
        self._by_key: dict[str, Partition] = {}
        self.rr = 0
        self._restored: dict[Ref, Any] = {}
        self.stats = {"records": 0, "bad": 0, "tokens": 0}
        self._count = KINDS[settings.kind].count
        self._interleaved = source.interleaved
        # A source with a read-ahead to keep (Kafka's) hears of each record taken and tops up
        # every check_s; one without (files) costs the hot path neither call.
        self._flow = math.isfinite(source.check_s)
        self._taken = source.taken  # once per record: bound once
        self._check_at = 0.0

    # -- lifecycle and the shards (kafeed.loader.sources.source.Shards) ----------------------------
    def open(self) -> None:
        self.source.open(self)

    def close(self) -> None:
        self.source.close()

    def stop_on(self, stop: threading.Event) -> None:
        """From now on waits for records raise :class:`kafeed.loader.workers.prefetch.Stopped` once
        ``stop`` is set (by another thread: the loader closing its prefetch thread)."""
        self.source.stop_on(stop)

    def add(self, part: Partition) -> None:
        self.parts.append(part)
        self.parts.sort(key=lambda x: (x.topic, x.partition))
        self._by_key[part.key] = part

    def remove(self, keys: list[str]) -> None:
        for key in keys:
            part = self._by_key.pop(key, None)
            if part is not None:
                self.parts.remove(part)
        self.rr = self.rr % len(self.parts) if self.parts else 0

    def restore(self, ref: Ref, payload: Any) -> None:
        self._restored[ref] = payload

    def _opened(self) -> bool:
        return self.source.opened

    # -- taking records --------------------------------------------------------------------
    @property
    def exhausted(self) -> bool:
        if not self.source.assigned:
            return False
        if self.settings.bounded:
            return all(p.fetch_done and not p.queue for p in self.parts)
        # Unbounded, a reader that a static assignment gave no partition has nothing to wait
        # for: it ends, as kafeed.loader.sources.assignment.warn_if_idle says, and DataLoader goes on
        # with the other workers (it would wait for this worker's batch, its turn in order,
        # for ever). In a group a rebalance may still give it partitions.
        return not self.parts and self.settings.mode != "group"

    def check_decoded(self) -> None:
        """At the end of a bounded run: raise SchemaError for a topic none of whose records
        decoded (kafeed.loader.nodes.decode explains when a topic is judged)."""
        self.source.check_decoded()

    def next(self, wait: float | None = None) -> Item | None:
        """The next record in order; ``None`` when exhausted or (unbounded) nothing came
        within ``wait`` seconds (default ``poll_timeout_s``)."""
        # Fast path (the common case): the shard whose turn it is has a record queued.
        parts = self.parts
        n = len(parts)
        if n:
            rr = self.rr if self.rr < n else 0
            part = parts[rr]
            queue = part.queue
            if queue:
                entry = queue.popleft()
                self.rr = (rr + 1 if rr + 1 < n else 0) if self._interleaved else rr
                # Accepted before the source's look at the queues: a record out of its queue
                # but not yet counted read would be fetched again (kafeed.loader.sources.kafka_flow).
                item = self._accept(part, entry)
                if self._flow:
                    self._taken(entry[3])
                    if time.monotonic() >= self._check_at:
                        self._top_up()
                if item is not None:
                    return item
        return self._take_slow(self.settings.poll_timeout_s if wait is None else wait)

    def _top_up(self) -> None:
        now = time.monotonic()
        self._check_at = now + self.source.check_s
        self.source.top_up(now)

    def _take_slow(self, wait: float) -> Item | None:
        idle = 0
        source = self.source
        while True:
            parts = self.parts
            if not parts:
                if self.exhausted:
                    return None
                if not source.fill(wait) and not self.settings.bounded:
                    return None
                continue
            n = len(parts)
            if self.rr >= n:
                self.rr = 0
            part = parts[self.rr]
            if part.queue:
                entry = part.queue.popleft()
                if self._interleaved:
                    self.rr = (self.rr + 1) % n
                item = self._accept(part, entry)  # before the look at the queues, as in next()
                if self._flow:
                    self._taken(entry[3])
                    if time.monotonic() >= self._check_at:
                        self._top_up()
                if item is not None:
                    return item
                continue
            if part.fetch_done:
                if self.exhausted:
                    # Where the cursor stops depends on which end-of-partition event came
                    # first; at the end it means nothing, so keep it canonical and two runs
                    # that delivered the same records save the same state.
                    self.rr = 0
                    return None
                self.rr = (self.rr + 1) % n
                continue
            if part.paused:  # emptied while paused: its turn needs it
                source.wake(part)
            if not self.settings.bounded and part.eof:
                self.rr = (self.rr + 1) % n
                idle += 1
                if idle >= n:
                    if not source.fill(wait):
                        return None
                    idle = 0
                continue
            source.fill(wait, part)

    def _accept(self, part: Partition, entry: Any) -> Item | None:
        offset = entry[0]
        if offset < part.read:
            return None
        part.read = offset + 1
        if offset in part.delivered:
            return None
        stats = self.stats
        try:
            payload = part.decode(entry)  # as its source says: Kafka's, the archive table's, a file's
        except SchemaError:  # the bad record that showed its topic holds another record type
            stats["bad"] += 1
            raise
        if payload is None:  # already logged (and dead-lettered) by the decoding
            part.delivered.add(offset)
            stats["bad"] += 1
            return None
        part.in_flight.add(offset)
        part.stamps[offset] = entry[2]
        stats["records"] += 1
        stats["tokens"] += self._count(payload)
        return (part.key, offset), payload, part.partial.get(offset, 0) if part.partial else 0

    def delivered(self, ref: Ref, *, handed_out: bool = True) -> None:
        """Mark a taken record as delivered (its last token/sample left in a batch, unless
        ``handed_out=False``: nothing of it was left to hand out after a resume)."""
        self.delivered_many((ref,), handed_out=handed_out)

    def delivered_many(self, refs: Iterable[Ref], *, handed_out: bool = True) -> None:
        """:meth:`delivered` for each of ``refs``, in one loop (once per record of a batch)."""
        by_key = self._by_key
        for key, offset in refs:
            part = by_key.get(key)
            if part is None:  # revoked in group mode
                continue
            part.in_flight.discard(offset)
            part.delivered.add(offset)
            stamp = part.stamps.pop(offset, None)
            if handed_out and stamp is not None:
                part.done.append(stamp)
            if len(part.delivered) > 4096 + 4 * len(part.in_flight):
                part.prune()

    def drain_delivered(self) -> tuple[dict[str, int], list[int]]:
        """Records delivered since the last drain: count per topic (or source name), their
        timestamps (ms; -1 for a record without one)."""
        per_topic: dict[str, int] = {}
        stamps: list[int] = []
        for part in self.parts:
            if part.done:
                per_topic[part.topic] = per_topic.get(part.topic, 0) + len(part.done)
                stamps.extend(part.done)
                part.done = []
        return per_topic, stamps

    # -- state (per shard the next position, the first not yet taken, the end and what was
    # delivered beyond the next; the cursor; the counts), whichever the source ------------
    def restored(self) -> dict[Ref, Any]:
        """The in-flight records of an exact resume, re-read by ``open()`` (decoded; ``None``
        for a record that no longer decodes). Records that are gone are missing."""
        restored, self._restored = self._restored, {}
        return restored

    def state(self) -> dict[str, Any]:
        """Positions per shard, the cursor and the counts (JSON data)."""
        return {"version": NODE_VERSIONS["reader"], "partitions": {p.key: p.entry() for p in self.parts},
                "rr": self.rr, "stats": dict(self.stats)}

    def reset(self, state: dict[str, Any], *, in_flight: Iterable[Ref] = ()) -> None:
        """Resume exactly where ``state`` was taken (call before ``open()``). ``in_flight``:
        the records taken but not yet delivered (whoever holds them names them), re-read
        by position when the reader opens."""
        if self._opened():
            raise RuntimeError("reset() must come before open()")
        check_node(state, "reader", STATE_KEYS)
        self.starts = exact_starts(state["partitions"], in_flight)
        self.rr = int(state["rr"])
        self.stats.update(state["stats"])  # in place: a decoder may count into the same dict

    def load_plan(self, plan: Mapping[str, Mapping[str, Any]]) -> None:
        """Resume elastically from per-shard positions (kafeed.loader.state.checkpoint.partition_plan)."""
        if self._opened():
            raise RuntimeError("load_plan() must come before open()")
        self.starts = plan_starts(plan)
