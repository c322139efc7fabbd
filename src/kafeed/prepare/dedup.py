"""Exact dedup: a 16-byte BLAKE2b of the normalized text, remembered per input partition.

Raw records are keyed by document id or content hash, so every copy of one text
lands in one input partition, and a per-partition seen-set catches them all
without any cross-worker coordination. The set is persisted as a compacted
changelog topic (one changelog partition per input partition) written in the
same Kafka transaction as the outputs and the input offsets, so after a crash,
restart or rebalance the new owner rebuilds exactly the set that matches the
committed offsets.

Within a batch, new hashes are *pending*: they count for the rest of the batch
and become part of the state only on :meth:`DedupState.commit`, so an aborted
transaction leaves no trace (:meth:`DedupState.rollback`).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

HASH_BYTES = 16
STATE_VERSION = 1
_PARTITION = struct.Struct(">i")


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


class DedupState:
    """Seen hashes per input partition, plus the current batch's pending ones."""

    def __init__(self) -> None:
        self._seen: dict[int, set[bytes]] = {}
        self._pending: dict[int, set[bytes]] = {}

    def partitions(self) -> list[int]:
        return sorted(self._seen)

    def size(self, partition: int) -> int:
        return len(self._seen.get(partition, ()))

    def load_partition(self, partition: int, digests: set[bytes]) -> None:
        """Install a rebuilt seen-set for ``partition`` (replacing any previous one)."""
        self._seen[partition] = digests
        self._pending.pop(partition, None)

    def drop_partition(self, partition: int) -> None:
        self._seen.pop(partition, None)
        self._pending.pop(partition, None)

    def check_and_add(self, partition: int, digest: bytes) -> bool:
        """True when ``digest`` is new for ``partition`` (and remember it as pending)."""
        seen = self._seen.setdefault(partition, set())
        pending = self._pending.setdefault(partition, set())
        if digest in seen or digest in pending:
            return False
        pending.add(digest)
        return True

    def pending(self) -> dict[int, set[bytes]]:
        return {p: set(d) for p, d in self._pending.items() if d}

    def commit(self) -> None:
        """The batch's transaction committed: its pending hashes are now seen."""
        for partition, digests in self._pending.items():
            self._seen.setdefault(partition, set()).update(digests)
        self._pending.clear()

    def rollback(self) -> None:
        """The batch's transaction aborted: forget its pending hashes."""
        self._pending.clear()

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "seen": {str(p): sorted(d.hex() for d in digests) for p, digests in self._seen.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"dedup state version {state.get('version')!r}, expected {STATE_VERSION}")
        self._seen = {int(p): {bytes.fromhex(h) for h in hashes} for p, hashes in state["seen"].items()}
        self._pending = {}
