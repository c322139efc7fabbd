"""A site's ledger: its own record of every update it made, kept at the site, never sent.

One entry per round under ``<state_dir>/<job>/sites/<site>/ledger/round-NNNNNN/``:
``update.blob`` (the update exactly as it was sent: the weights delta, unmasked, in
:mod:`kafeed.federate.blobs`' encoding) and ``entry.json`` (round, the global version it
trained from, sample count, the blob's SHA-256, the loader state before and after, the data
offsets it trained on, and whether the update's transaction committed), and with secure
aggregation ``revealed`` once the site gave out its seed in that round. They are written the
way checkpoints are (temporary name, fsync, rename, directory fsync), the blob first: an entry
that exists is whole.

The ledger is what makes a site exact through crashes (its last entry's loader state is where
the next round's data starts; an entry not yet marked sent is sent again, the coordinator
counting it once) and the source of lineage from a global version to the site's records.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kafeed.errors import ResumeMismatch
from kafeed.federate.blobs import decode_arrays, encode_arrays
from kafeed.train.checkpoint import write_atomic
from kafeed.train.lineage import lineage_of

LEDGER_VERSION = 1


@dataclass(frozen=True)
class LedgerEntry:
    """One round's update as the site made it."""

    round: int
    base_version: int
    samples: int
    sha256: str
    loader_before: dict[str, Any]
    loader_after: dict[str, Any]
    sent: bool
    path: Path

    def delta(self) -> dict[str, np.ndarray]:
        data = (self.path / "update.blob").read_bytes()
        if hashlib.sha256(data).hexdigest() != self.sha256:
            raise ResumeMismatch(f"The ledger's update of round {self.round} in {self.path} does not "
                                 "match its checksum.", hint="The file was changed after it was written.")
        return decode_arrays(data)[0]

    def blob(self) -> bytes:
        return (self.path / "update.blob").read_bytes()

    def offsets(self) -> dict[str, Any]:
        """The data offsets this update trained on: per partition, half-open ranges."""
        starts = {key: int(entry["next"]) for reader in _readers(self.loader_before)
                  for key, entry in reader["reader"]["partitions"].items()}
        return lineage_of(self.loader_after, starts)["partitions"] if self.loader_after else {}


def _readers(state: dict[str, Any]) -> list[dict[str, Any]]:
    from kafeed.loader.state.checkpoint import reader_entries

    return list(reader_entries(state)) if state else []


class Ledger:
    """The entries of one site, in its state directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / "ledger"

    def _dir(self, round_: int) -> Path:
        return self.directory / f"round-{round_:06d}"

    def entry(self, round_: int) -> LedgerEntry | None:
        path = self._dir(round_) / "entry.json"
        if not path.exists():
            return None
        doc = json.loads(path.read_text())
        if doc.get("version") != LEDGER_VERSION:
            raise ResumeMismatch(f"The ledger entry {path} has version {doc.get('version')}, "
                                 f"this kafeed reads {LEDGER_VERSION}.")
        return LedgerEntry(round=int(doc["round"]), base_version=int(doc["base_version"]),
                           samples=int(doc["samples"]), sha256=str(doc["sha256"]),
                           loader_before=doc["loader_before"], loader_after=doc["loader_after"],
                           sent=bool(doc["sent"]), path=path.parent)

    def entries(self) -> list[LedgerEntry]:
        if not self.directory.is_dir():
            return []
        rounds = sorted(int(p.name.removeprefix("round-")) for p in self.directory.glob("round-*"))
        return [e for r in rounds if (e := self.entry(r)) is not None]

    def last(self) -> LedgerEntry | None:
        entries = self.entries()
        return entries[-1] if entries else None

    def record(self, *, round_: int, base_version: int, samples: int, delta: dict[str, np.ndarray],
               loader_before: dict[str, Any], loader_after: dict[str, Any]) -> LedgerEntry:
        """Write round ``round_``'s entry (not yet sent); returns it."""
        folder = self._dir(round_)
        folder.mkdir(parents=True, exist_ok=True)
        blob = encode_arrays(delta, {"round": round_, "samples": samples, "base_version": base_version})
        write_atomic(folder / "update.blob", blob)
        doc = {"version": LEDGER_VERSION, "round": round_, "base_version": base_version,
               "samples": samples, "sha256": hashlib.sha256(blob).hexdigest(),
               "loader_before": loader_before, "loader_after": loader_after, "sent": False}
        write_atomic(folder / "entry.json", json.dumps(doc, sort_keys=True).encode())
        entry = self.entry(round_)
        if entry is None:  # pragma: no cover - just written
            raise ResumeMismatch(f"The ledger entry of round {round_} vanished after it was written.")
        return entry

    def mark_revealed(self, round_: int) -> None:
        """Record, before the seed goes out, that this site revealed its self-mask seed in round
        ``round_``: it never reveals one for another attempt of that round (kafeed.federate.secagg)."""
        write_atomic(self._dir(round_) / "revealed", b"1")

    def revealed(self, round_: int) -> bool:
        return (self._dir(round_) / "revealed").exists()

    def mark_sent(self, round_: int) -> None:
        path = self._dir(round_) / "entry.json"
        doc = json.loads(path.read_text())
        doc["sent"] = True
        write_atomic(path, json.dumps(doc, sort_keys=True).encode())
