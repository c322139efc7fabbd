"""The held-out slice of a checkpoint: records its model did not train on, from its lineage.

- **gpt**: per partition, the records after the checkpoint's saved position (after the
  last offset range it trained on), skipping documents the packer had partly emitted.
  The slice moves with the checkpoint: each checkpoint is scored on the data that came
  next, as a model trained on a stream would meet it.
- **classifier**: the stable tenth of documents the trainer holds out by a hash of their
  id (:func:`kafeed.train.classifier.held_out`), read from where the run started. The same
  records for every checkpoint of a run.

Both are bounded: at most ``records`` accepted records, shared out evenly over the
partitions, and at most what each partition held when the read began.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.loader.state.checkpoint import carried, reader_entries
from kafeed.loader.state.rank_states import loadable_state

T = TypeVar("T")
#: A partition that yields nothing new for this long (its high watermark is a control
#: record, or the broker is away) ends its part of the slice.
IDLE_S = 10.0


def positions_after(manifest: dict[str, Any]) -> tuple[dict[str, int], set[tuple[str, int]]]:
    """Per ``topic:partition`` the first offset after everything the checkpoint trained on,
    and the (key, offset) pairs of partly trained documents at or past it."""
    starts: dict[str, int] = {}
    partly: set[tuple[str, int]] = set()
    for key, entry in manifest["lineage"]["partitions"].items():
        ranges = entry["ranges"]
        starts[key] = max(int(entry["next"]), int(ranges[-1][1]) if ranges else 0)
    for reader in reader_entries(loadable_state(manifest["loader"])):
        for key, offset, emitted in carried(reader):
            if emitted:
                partly.add((str(key), int(offset)))
    return starts, partly


def run_starts(manifest: dict[str, Any]) -> dict[str, int]:
    """Per ``topic:partition`` the offset the run started reading at."""
    lineage = manifest["lineage"]
    return {key: int(lineage["starts"].get(key, entry.get("start", 0)))
            for key, entry in lineage["partitions"].items()}


def read_slice(connection: ConnectionSettings, starts: dict[str, int], *, records: int,
               accept: Callable[[Any], T | None], max_scan: int | None = None,
               ) -> tuple[list[T], dict[str, list[int]]]:
    """Read each partition from its start; ``accept(msg)`` turns a record into an item or
    None (skipped). Returns the items (partitions in name order) and per partition the
    ``[start, end)`` offsets read."""
    from kafeed.kafka.types import TopicPartition

    quota = math.ceil(records / max(1, len(starts)))
    scan = max_scan if max_scan is not None else quota
    consumer = KafkaClients(connection).read_committed_consumer({
        "group.id": f"kafeed-evaluate-{uuid.uuid4().hex}", "enable.partition.eof": False})
    items: list[T] = []
    spans: dict[str, list[int]] = {}
    try:
        for key in sorted(starts):
            topic, _, part = key.rpartition(":")
            tp = TopicPartition(topic, int(part))
            low, high = consumer.get_watermark_offsets(tp, timeout=10)
            begin = max(starts[key], low)
            spans[key] = [begin, begin]
            if begin >= high:
                continue
            consumer.assign([TopicPartition(topic, int(part), begin)])
            taken = scanned = 0
            idle_since = time.monotonic()
            while taken < quota and scanned < scan:
                msgs = consumer.consume(num_messages=min(500, scan - scanned), timeout=0.5)
                for msg in msgs:
                    if msg.error():
                        continue
                    spans[key][1] = msg.offset() + 1
                    scanned += 1
                    item = accept(msg)
                    if item is not None:
                        items.append(item)
                        taken += 1
                        if taken >= quota:
                            break
                if msgs:
                    idle_since = time.monotonic()
                    continue
                position = consumer.position([tp])[0].offset
                if position >= high or time.monotonic() - idle_since > IDLE_S:
                    break
            consumer.unassign()
    finally:
        consumer.close()
    return items, spans
