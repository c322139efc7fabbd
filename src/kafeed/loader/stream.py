"""A reader's whole pipeline: Kafka records -> shuffle buffer -> packer -> numpy batches.

:class:`TokenStream` and :class:`SampleStream` run inside one DataLoader worker (or the
main process) and know nothing about torch. ``state()`` is this reader's entry of the
loader state (see kafeed.loader.state) as of the last batch returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from kafeed.errors import ResumeMismatch
from kafeed.loader.packing import TokenPacker
from kafeed.loader.reader import Item, KafkaReader, PartitionStart, Ref
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.shuffle import ShuffleBuffer
from kafeed.loader.state import RECREATED_HINT

Batch = dict[str, Any]


@dataclass(frozen=True)
class Delivered:
    """What a batch handed out, for the loader metrics (travels beside the batch, not in it):
    records finished per topic, their Kafka timestamps (ms), and the reader's next offset
    per partition key as of the batch."""

    per_topic: dict[str, int] = field(default_factory=dict)
    timestamps: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    positions: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, drained: tuple[dict[str, int], list[int]], state: dict[str, Any]) -> Delivered:
        per_topic, stamps = drained
        return cls(per_topic=per_topic, timestamps=np.array(stamps, dtype=np.int64),
                   positions={key: int(p["next"]) for key, p in state["partitions"].items()})


def starts_from_reader_state(entry: dict[str, Any]) -> dict[str, PartitionStart]:
    """Exact resume: the saved positions plus the in-flight records to re-read."""
    restore: dict[str, set[int]] = {}
    for key, offset in entry["buffer"]:
        restore.setdefault(key, set()).add(int(offset))
    for key, offset, _emitted in entry["carry"]:
        restore.setdefault(key, set()).add(int(offset))
    return {
        key: PartitionStart(
            next=int(p["next"]), read=int(p["read"]), end=p["end"],
            delivered={int(o) for o in p["delivered"]}, restore=restore.get(key, set()),
        )
        for key, p in entry["partitions"].items()
    }


def starts_from_plan(plan: dict[str, dict[str, Any]]) -> dict[str, PartitionStart]:
    """Elastic resume: per-partition positions only; in-flight records are read again."""
    return {
        key: PartitionStart(next=p["next"], read=p["next"], end=p["end"], delivered=set(p["delivered"]),
                            partial=dict(p["partial"]))
        for key, p in plan.items()
    }


class _Stream:
    def __init__(self, settings: LoaderSettings, reader: KafkaReader, exact: dict[str, Any] | None) -> None:
        self.settings = settings
        self.reader = reader
        self.exact = exact
        self.shuffle: ShuffleBuffer[Item] | None = None
        # What the last next_batch() handed out; drained every batch so nothing piles up.
        self.last_delivered: tuple[dict[str, int], list[int]] = ({}, [])
        if settings.shuffle_buffer:
            self.shuffle = ShuffleBuffer(settings.shuffle_buffer, [settings.seed, reader.index])

    def open(self) -> None:
        self.reader.open()
        if self.exact is None:
            return
        self.reader.rr = int(self.exact["rr"])
        self.reader.stats.update(self.exact["stats"])
        restored = self.reader.restored
        if self.shuffle is not None and self.exact["rng"] is not None:
            items = [[k, int(o)] for k, o in self.exact["buffer"] if (k, int(o)) in restored]
            self.shuffle.load_state_dict(
                {"version": 1, "rng": self.exact["rng"], "items": items},
                decode=lambda kv: ((kv[0], kv[1]), restored[(kv[0], kv[1])], 0))
        self._restore_extra(restored)

    def _restore_extra(self, restored: dict[Ref, Any]) -> None:
        pass

    def close(self) -> None:
        self.reader.close()

    def _next_item(self) -> Item | None:
        if self.shuffle is None:
            return self.reader.take()
        while not self.shuffle.full:
            item = self.reader.take()
            if item is None:
                break
            self.shuffle.add(item)
        return self.shuffle.pop() if len(self.shuffle) else None

    @property
    def exhausted(self) -> bool:
        return self.reader.exhausted and not (self.shuffle is not None and len(self.shuffle))

    def _ended(self) -> bool:
        """True once a bounded stream is used up (after refusing a topic of the wrong type)."""
        if not self.exhausted:
            return False
        self.reader.check_decoded()
        return True

    def _carry(self) -> list[list[Any]]:
        return []

    def state(self) -> dict[str, Any]:
        buffer: list[list[Any]] = []
        rng = None
        if self.shuffle is not None:
            shuffle_state = self.shuffle.state_dict(encode=lambda item: [item[0][0], item[0][1]])
            buffer, rng = shuffle_state["items"], shuffle_state["rng"]
        return {
            "index": self.reader.index,
            "partitions": self.reader.partitions_state(),
            "rr": self.reader.rr,
            "buffer": buffer,
            "rng": rng,
            "carry": self._carry(),
            "stats": dict(self.reader.stats),
        }


class TokenStream(_Stream):
    """Packed windows of ``seq_len + 1`` token ids, ``batch_size`` at a time."""

    def __init__(self, settings: LoaderSettings, reader: KafkaReader, exact: dict[str, Any] | None) -> None:
        super().__init__(settings, reader, exact)
        self.packer = TokenPacker(settings.window, settings.eos_id)

    def _restore_extra(self, restored: dict[Ref, Any]) -> None:
        if self.exact is None:
            return
        carry = [c for c in self.exact["carry"] if (c[0], int(c[1])) in restored]
        try:
            self.packer.load_state_dict({"version": 1, "carry": carry}, fetch=lambda ref: restored[ref])
        except ValueError as exc:  # a carry entry claims more tokens emitted than the record has
            raise ResumeMismatch(f"The saved loader state's packer carry-over does not fit the records "
                                 f"it names ({exc}).", hint=RECREATED_HINT) from None

    def _carry(self) -> list[list[Any]]:
        return [[ref[0], ref[1], emitted] for ref, emitted in self.packer.carry()]

    def next_batch(self, batch_size: int) -> Batch | None:
        """Up to ``batch_size`` windows; ``None`` once a bounded stream is used up."""
        window = self.settings.window
        need = batch_size * window
        packer = self.packer
        next_item = self._next_item
        push = packer.push
        while packer.available < need:
            item = next_item()
            if item is None:
                if self._ended():
                    break
                continue
            ref, tokens, start = item
            if start and len(tokens) + 1 - start <= 0:
                self.reader.delivered(ref, handed_out=False)
                continue
            push(ref, tokens, start)
        count = min(need, packer.available)
        pad = 0
        if count < need:  # a bounded stream's tail
            whole = count - count % window
            if self.settings.drop_last or count == whole:
                count = whole
            else:
                pad = window - count % window
        if count == 0:
            return None
        tokens, starts, finished = packer.pop(count, boundaries=self.settings.return_boundaries)
        self.reader.delivered_many(finished)
        self.last_delivered = self.reader.drain_delivered()
        if pad:
            tokens = np.concatenate([tokens, np.full(pad, self.settings.eos_id, dtype=np.int64)])
            if starts is not None:
                starts = np.concatenate([starts, np.zeros(pad, dtype=np.bool_)])
        batch: Batch = {"tokens": tokens.reshape(-1, window)}
        if starts is not None:
            batch["doc_start"] = starts.reshape(-1, window)
        return batch


class SampleStream(_Stream):
    """TrainingSample records as dicts, ``batch_size`` at a time (collated by the dataset)."""

    def next_batch(self, batch_size: int) -> list[dict[str, Any]] | None:
        items: list[Item] = []
        while len(items) < batch_size:
            item = self._next_item()
            if item is None:
                if self._ended():
                    break
                continue
            items.append(item)
        if not items or (self.settings.drop_last and len(items) < batch_size):
            return None  # a dropped tail stays undelivered: the state still points before it
        out = []
        for ref, sample, _ in items:
            self.reader.delivered(ref)
            topic, _, partition = ref[0].rpartition(":")
            out.append({**sample, "topic": topic, "partition": int(partition), "offset": ref[1]})
        self.last_delivered = self.reader.drain_delivered()
        return out

