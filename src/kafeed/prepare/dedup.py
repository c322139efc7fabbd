"""Exact dedup within each input partition (``dedup.scope = "partition"``): a 16-byte BLAKE2b
of the normalized text, remembered per input partition.

This catches every copy of a text only when copies share a record key (so they land
in one input partition); the default global scope (:mod:`kafeed.prepare.rekey`)
does not need that. The per-partition seen-set is persisted as a compacted
changelog topic (one changelog partition per input partition) written in the
same Kafka transaction as the outputs and the input offsets, so after a crash,
restart or rebalance the new owner rebuilds exactly the set that matches the
committed offsets.

Within a batch, new hashes are *pending*: they count for the rest of the batch
(and later batches) and become part of the state only on :meth:`DedupState.commit`,
so an aborted transaction leaves no trace (:meth:`DedupState.rollback`).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

HASH_BYTES = 16
STATE_VERSION = 1
_PARTITION = struct.Struct(">i")
_BATCH_KEY = struct.Struct(">iq")  # input partition, first input offset of the batch


def content_hash(text: str) -> bytes:
    """BLAKE2b-128 of the UTF-8 text."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=HASH_BYTES).digest()


def changelog_key(partition: int, digest: bytes) -> bytes:
    """Changelog record key: big-endian input partition, then the hash (compaction keeps one per pair)."""
    return _PARTITION.pack(partition) + digest


def parse_changelog_key(key: bytes) -> tuple[int, bytes]:
    if len(key) != _PARTITION.size + HASH_BYTES:
        raise ValueError(f"changelog key has {len(key)} bytes, expected {_PARTITION.size + HASH_BYTES}")
    return _PARTITION.unpack_from(key)[0], key[_PARTITION.size:]


def batch_changelog_record(partition: int, first_offset: int, digests: list[bytes]) -> tuple[bytes, bytes]:
    """One record for a whole batch: key = partition + first input offset, value = the hashes."""
    return _BATCH_KEY.pack(partition, first_offset), b"".join(digests)


def parse_changelog_record(key: bytes, value: bytes | None) -> tuple[int, list[bytes]]:
    """(input partition, hashes) of a changelog record in either format, told apart by key length."""
    if len(key) == _BATCH_KEY.size:
        partition = _BATCH_KEY.unpack(key)[0]
        data = value or b""
        if len(data) % HASH_BYTES:
            raise ValueError(f"changelog batch value of {len(data)} bytes is not whole hashes")
        return partition, [data[i:i + HASH_BYTES] for i in range(0, len(data), HASH_BYTES)]
    partition, digest = parse_changelog_key(key)
    return partition, [digest]


class DedupState:
    """Seen hashes per input partition, plus pending layers: one per batch not yet committed.

    With commits overlapped (batch N commits while batch N+1 runs its stages) two
    layers can be pending at once; a hash counts as seen if it is in the committed
    set or any pending layer. :meth:`commit` promotes the oldest layer; :meth:`rollback`
    drops them all (a failed commit rewinds every batch after it too).
    """

    def __init__(self) -> None:
        self._seen: dict[int, set[bytes]] = {}
        self._layers: list[dict[int, set[bytes]]] = []

    def partitions(self) -> list[int]:
        return sorted(self._seen)

    def size(self, partition: int) -> int:
        return len(self._seen.get(partition, ()))

    def load_partition(self, partition: int, digests: set[bytes]) -> None:
        """Install a rebuilt seen-set for ``partition`` (replacing any previous one)."""
        self._seen[partition] = digests
        for layer in self._layers:
            layer.pop(partition, None)

    def drop_partition(self, partition: int) -> None:
        self._seen.pop(partition, None)
        for layer in self._layers:
            layer.pop(partition, None)

    def new_layer(self) -> None:
        """Start a batch: its new hashes go to a fresh pending layer."""
        self._layers.append({})

    def check_and_add(self, partition: int, digest: bytes) -> bool:
        """True when ``digest`` is new for ``partition`` (and remember it as pending)."""
        if digest in self._seen.get(partition, ()):
            return False
        if not self._layers:
            self._layers.append({})
        for layer in self._layers:
            if digest in layer.get(partition, ()):
                return False
        self._layers[-1].setdefault(partition, set()).add(digest)
        return True

    def pending(self) -> dict[int, set[bytes]]:
        """The newest layer's hashes (the current batch's changelog entries)."""
        if not self._layers:
            return {}
        return {p: set(d) for p, d in self._layers[-1].items() if d}

    def commit(self) -> None:
        """The oldest pending batch committed: its hashes are now seen."""
        if not self._layers:
            return
        for partition, digests in self._layers.pop(0).items():
            self._seen.setdefault(partition, set()).update(digests)

    def rollback(self) -> None:
        """A transaction aborted: forget every pending hash (all later batches are re-read too)."""
        self._layers.clear()

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "seen": {str(p): sorted(d.hex() for d in digests) for p, digests in self._seen.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"dedup state version {state.get('version')!r}, expected {STATE_VERSION}")
        self._seen = {int(p): {bytes.fromhex(h) for h in hashes} for p, hashes in state["seen"].items()}
        self._layers = []
