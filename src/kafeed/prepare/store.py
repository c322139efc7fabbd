"""Compact sets of 8-byte content hashes: an open-addressing table in one NumPy array.

A remembered document costs one ``uint64`` slot; the table doubles when it is
three quarters full, so it holds 8 / load bytes per document: 10.7-21.3 B.
:class:`Generations` bounds the state for streams that never end: hashes go to
the current generation; when it holds ``max_entries / 2`` hashes, or is older
than ``horizon / 2``, it becomes the old generation (frozen as a sorted array,
8 B per hash, looked up by binary search) and the previous old one is dropped.
So between half and all of the last ``max_entries`` hashes (or ``horizon``) are
remembered. Every operation works on a whole batch of hashes at once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
_EMPTY = np.uint64(0)
_MAX_LOAD = 0.75


def as_keys(digests: list[bytes]) -> U64:
    """The first 8 bytes of each digest as ``uint64`` (0 marks an empty slot, so it becomes 1)."""
    keys = np.frombuffer(b"".join(d[:8] for d in digests), dtype="<u8").astype(np.uint64)
    keys[keys == _EMPTY] = 1
    return keys


def key_of(digest: bytes) -> int:
    """One digest's key (see :func:`as_keys`)."""
    return int.from_bytes(digest[:8], "little") or 1


class HashTable:
    """A set of nonzero ``uint64`` keys; linear probing, batch lookups and inserts."""

    def __init__(self, capacity: int = 1024) -> None:
        size = 1 << max(4, (max(capacity, 1) - 1).bit_length())
        self._slots: U64 = np.zeros(size, dtype=np.uint64)
        self.count = 0

    @property
    def nbytes(self) -> int:
        return int(self._slots.nbytes)

    def _find(self, keys: U64) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
        """Per key: present?, and the slot where it is (or the empty slot that ends its probe)."""
        mask = np.uint64(len(self._slots) - 1)
        idx = (keys & mask).astype(np.int64)
        found = np.zeros(len(keys), dtype=bool)
        active = np.arange(len(keys))
        while active.size:
            values = self._slots[idx[active]]
            hit = values == keys[active]
            found[active[hit]] = True
            go_on = ~hit & (values != _EMPTY)
            active = active[go_on]
            idx[active] = (idx[active] + 1) & int(mask)
        return found, idx

    def contains(self, keys: U64) -> npt.NDArray[np.bool_]:
        return self._find(keys)[0]

    def add(self, keys: U64) -> int:
        """Insert ``keys`` (duplicates and present ones are skipped); how many were new."""
        keys = np.unique(keys)
        keys = keys[~self.contains(keys)]
        if not keys.size:
            return 0
        if self.count + keys.size > _MAX_LOAD * len(self._slots):
            self._grow(self.count + keys.size)
        mask = len(self._slots) - 1
        idx = (keys & np.uint64(mask)).astype(np.int64)
        todo = np.arange(keys.size)
        while todo.size:
            free = self._slots[idx[todo]] == _EMPTY
            claim = todo[free]
            # Two keys probing the same empty slot: the first takes it, the other probes on.
            _, first = np.unique(idx[claim], return_index=True)
            won = claim[first]
            self._slots[idx[won]] = keys[won]
            lost = np.ones(todo.size, dtype=bool)
            lost[np.flatnonzero(free)[first]] = False
            todo = todo[lost]
            idx[todo] = (idx[todo] + 1) & mask
        self.count += int(keys.size)
        return int(keys.size)

    def _grow(self, need: int) -> None:
        keys = self.keys()
        size = len(self._slots)
        while need > _MAX_LOAD * size:
            size *= 2
        self._slots = np.zeros(size, dtype=np.uint64)
        self.count = 0
        self.add(keys)

    def keys(self) -> U64:
        keys: U64 = self._slots[self._slots != _EMPTY]
        return keys


class Generations:
    """The hashes of one state partition: a growing current table and a frozen older generation.

    ``generation`` counts rotations; ``started_ms`` is the record timestamp at which the
    current generation began. Rotation happens in :meth:`add_batch` only, after the batch's
    hashes went in, so replaying the same batches rebuilds the same state.
    """

    def __init__(self, *, max_entries: int | None = None, horizon_ms: int | None = None) -> None:
        self.max_entries = max_entries
        self.horizon_ms = horizon_ms
        self.current = HashTable()
        self.old: U64 = np.zeros(0, dtype=np.uint64)  # sorted
        self.generation = 0
        self.started_ms = -1

    def __len__(self) -> int:
        return self.current.count + int(self.old.size)

    @property
    def nbytes(self) -> int:
        return self.current.nbytes + int(self.old.nbytes)

    def contains(self, keys: U64) -> npt.NDArray[np.bool_]:
        found = self.current.contains(keys)
        if self.old.size:
            pos = np.searchsorted(self.old, keys)
            pos[pos >= self.old.size] = 0
            found |= self.old[pos] == keys
        return found

    def add_batch(self, keys: U64, timestamp_ms: int) -> None:
        """Remember one committed batch's new hashes, then rotate if a bound was reached."""
        if self.started_ms < 0:
            self.started_ms = timestamp_ms
        self.current.add(keys)
        full = self.max_entries is not None and self.current.count >= max(1, self.max_entries // 2)
        aged = (self.horizon_ms is not None and timestamp_ms >= 0
                and timestamp_ms - self.started_ms >= self.horizon_ms // 2)
        if full or aged:
            self.rotate(timestamp_ms)

    def rotate(self, timestamp_ms: int) -> None:
        self.old = np.sort(self.current.keys())
        self.current = HashTable()
        self.generation += 1
        self.started_ms = timestamp_ms

    def load(self, *, generation: int, started_ms: int, current: U64, old: U64) -> None:
        """Install a snapshot (see :mod:`kafeed.prepare.global_dedup`)."""
        self.generation, self.started_ms = generation, started_ms
        self.current = HashTable(int(current.size / _MAX_LOAD) + 1)
        self.current.add(current)
        self.old = np.sort(old)
