"""Dedup state of the re-keyed stream: compact hash tables per partition, snapshotted in the changelog.

After the route step every copy of a text sits in one partition of the repartition
topic (the key is the text's hash), so a partition-local set catches copies that
entered under any id and in any input partition. Per partition the state is a
:class:`~kafeed.prepare.store.Generations` of 8-byte keys.

Changelog records (all in the batch's transaction, changelog partition = state
partition), keys chosen so that compaction keeps a bounded number per partition:

- tail ``b"B" + partition + slot``: one batch's new keys (value: timestamp, keys),
  ``slot`` counting batches since the last snapshot (so it wraps and reuses keys);
- every ``snapshot_every`` batches a snapshot instead: ``b"S" + partition + chunk``
  records with the generations' keys, closed by the core's end marker
  (:func:`kafeed.stream.snapshots.snapshot_end`) carrying generation and start time.

Restore reads the newest snapshot and the tail after it, and replays the tail
through the same :meth:`Generations.add_batch` the live path used.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence

import numpy as np

from kafeed.prepare.store import U64, Generations
from kafeed.stream.snapshots import parse_snapshot_end, snapshot_end

log = logging.getLogger("kafeed")

_TAIL = struct.Struct(">cii")  # b"B", partition, slot
_CHUNK = struct.Struct(">cii")  # b"S", partition, chunk index
_TAIL_HEAD = struct.Struct(">q")  # max record timestamp of the batch (ms)
_CHUNK_HEAD = struct.Struct(">B")  # 0: old generation, 1: current
_MARK = struct.Struct(">qq")  # generation, started_ms
CHUNK_KEYS = 60_000  # 480 KB of keys per chunk record: below the 1 MB default message limit

StateChange = tuple[int, bytes, bytes | None]


class GlobalDedupState:
    """Committed :class:`Generations` per partition plus pending layers (one per uncommitted batch)."""

    def __init__(self, *, max_entries: int | None = None, horizon_ms: int | None = None,
                 snapshot_every: int = 200) -> None:
        self.max_entries = max_entries
        self.horizon_ms = horizon_ms
        self.snapshot_every = snapshot_every
        self._parts: dict[int, Generations] = {}
        self._slots: dict[int, int] = {}  # committed tail records since the last snapshot
        # Per pending batch: partition -> (new keys, max timestamp, slot after the batch).
        self._layers: list[dict[int, tuple[set[int], int, int]]] = []

    def _gens(self, partition: int) -> Generations:
        if partition not in self._parts:
            self._parts[partition] = Generations(max_entries=self.max_entries, horizon_ms=self.horizon_ms)
            self._slots[partition] = 0
        return self._parts[partition]

    def __len__(self) -> int:
        return sum(len(g) for g in self._parts.values())

    @property
    def nbytes(self) -> int:
        return sum(g.nbytes for g in self._parts.values())

    def size(self, partition: int) -> int:
        return len(self._parts[partition]) if partition in self._parts else 0

    # -- one batch ----------------------------------------------------------------------------------

    def check_batch(self, partitions: Sequence[int], keys: U64, timestamps: Sequence[int]) -> list[bool]:
        """Per record: is its key new? New keys become pending in a fresh layer."""
        return [hit < 0 for hit in self.check_groups(partitions, keys.reshape(-1, 1), timestamps)]

    def check_groups(self, partitions: Sequence[int], groups: U64, timestamps: Sequence[int]) -> list[int]:
        """Per record (a row of keys): -1 when none of its keys is known, else the first known one's column.

        A record with no known key is new: all its keys become pending in a fresh layer. Known
        means committed, pending in an earlier layer, or added by an earlier record of the batch.
        """
        layer: dict[int, tuple[set[int], int, int]] = {}
        self._layers.append(layer)
        known = np.zeros(groups.shape, dtype=bool)
        parts = np.asarray(partitions, dtype=np.int64)
        for p in set(partitions):
            rows = np.flatnonzero(parts == p)
            known[rows] = self._gens(p).contains(groups[rows].ravel()).reshape(len(rows), -1)
        out: list[int] = []
        for p, row, seen, ts in zip(partitions, groups.tolist(), known.tolist(), timestamps, strict=True):
            pending = [older[p][0] for older in self._layers if p in older]
            hit = next((j for j, key in enumerate(row) if seen[j] or any(key in s for s in pending)), -1)
            out.append(hit)
            if hit >= 0:
                continue
            entry = layer.get(p)
            if entry is None:
                layer[p] = (set(row), ts, 0)
            else:
                entry[0].update(row)
                layer[p] = (entry[0], max(entry[1], ts), 0)
        return out

    def changelog(self) -> list[StateChange]:
        """The newest layer as changelog records: a tail record, or a snapshot every ``snapshot_every``."""
        out: list[StateChange] = []
        layer = self._layers[-1] if self._layers else {}
        for p, (keys, ts, _) in sorted(layer.items()):
            slot = self._pending_slot(p)
            if slot + 1 >= self.snapshot_every:
                out.extend(self._snapshot(p))
                layer[p] = (keys, ts, 0)
            else:
                value = _TAIL_HEAD.pack(ts) + np.fromiter(keys, np.uint64, len(keys)).tobytes()
                out.append((p, _TAIL.pack(b"B", p, slot), value))
                layer[p] = (keys, ts, slot + 1)
        return out

    def _pending_slot(self, partition: int) -> int:
        """Tail records written since the last snapshot, counting pending batches before the newest."""
        slot = self._slots.get(partition, 0)
        for older in self._layers[:-1]:
            if partition in older:
                slot = older[partition][2]
        return slot

    def _snapshot(self, partition: int) -> list[StateChange]:
        gens = self._gens(partition)
        pending = [k for layer in self._layers if partition in layer for k in layer[partition][0]]
        current = np.concatenate([gens.current.keys(), np.asarray(pending, dtype=np.uint64)])
        out: list[StateChange] = []
        for which, keys in ((0, gens.old), (1, current)):
            for start in range(0, max(1, len(keys)), CHUNK_KEYS):
                part = keys[start:start + CHUNK_KEYS]
                out.append((partition, _CHUNK.pack(b"S", partition, len(out)),
                            _CHUNK_HEAD.pack(which) + part.tobytes()))
        key, value = snapshot_end(partition, len(out), _MARK.pack(gens.generation, gens.started_ms))
        out.append((partition, key, value))
        return out

    def commit(self) -> None:
        """The oldest pending batch committed: its keys join the tables (which may rotate)."""
        if not self._layers:
            return
        for p, (keys, ts, slot) in self._layers.pop(0).items():
            self._gens(p).add_batch(np.fromiter(keys, np.uint64, len(keys)), ts)
            self._slots[p] = slot

    def rollback(self) -> None:
        self._layers.clear()

    # -- partitions ----------------------------------------------------------------------------------

    def drop_partition(self, partition: int) -> None:
        self._parts.pop(partition, None)
        self._slots.pop(partition, None)
        for layer in self._layers:
            layer.pop(partition, None)

    def restore(self, partition: int, entries: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Rebuild ``partition`` from its newest snapshot and the tail records after it."""
        self.drop_partition(partition)
        gens = self._gens(partition)
        chunks: dict[int, list[U64]] = {0: [], 1: []}
        tail = 0
        for key, value in entries:
            marker = parse_snapshot_end(key, value)
            if marker is not None:
                generation, started = _MARK.unpack_from(marker[1])
                gens.load(generation=generation, started_ms=started,
                          current=_concat(chunks[1]), old=_concat(chunks[0]))
                chunks, tail = {0: [], 1: []}, 0
            elif value is not None and len(key) == _CHUNK.size and key[:1] == b"S":
                chunks[value[0]].append(np.frombuffer(value, np.uint64, offset=1) if len(value) > 1
                                        else np.zeros(0, np.uint64))
            elif value is not None and len(key) == _TAIL.size and key[:1] == b"B":
                ts = _TAIL_HEAD.unpack_from(value)[0]
                gens.add_batch(np.frombuffer(value, np.uint64, offset=_TAIL_HEAD.size), ts)
                tail += 1
            else:
                log.debug("skipping a changelog record of another format in partition %d", partition)
        self._slots[partition] = tail


def _concat(parts: list[U64]) -> U64:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
