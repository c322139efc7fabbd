"""A reader's whole pipeline: records -> shuffle buffer -> packer -> numpy batches.

:class:`TokenStream` and :class:`SampleStream` run inside one DataLoader worker (or the
main process) and know nothing about torch. Each is a node (kafeed.loader.nodes.node) composed
of three: ``state()`` is this reader's entry of the loader state (see
kafeed.loader.state.checkpoint) as of the last batch returned, its reader's, shuffle buffer's
and packer's states nested under their own keys, each checked by its node when reset.
"""

from __future__ import annotations

import threading
import time
from operator import itemgetter
from typing import Any, Protocol

import numpy as np

from kafeed.errors import ResumeMismatch
from kafeed.loader.nodes.delivered import Delivered
from kafeed.loader.nodes.node import NODE_VERSIONS, check_node
from kafeed.loader.nodes.packing import Span, TokenPacker, Window
from kafeed.loader.nodes.reader import ShardReader
from kafeed.loader.nodes.shuffle import ShuffleBuffer
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.partition import Item, Ref
from kafeed.loader.state.checkpoint import RECREATED_HINT, STREAM_KEYS, buffered, carried
from kafeed.loader.workers.deferred_entry import DeferredEntry

__all__ = ["Batch", "BatchStream", "Delivered", "SampleStream", "TokenStream"]  # Delivered: its old home

Batch = dict[str, Any]


class BatchStream(Protocol):
    """What a dataset iterates: one reader's batches and its state as of each (a token or
    sample stream here, or a mixture of token streams: kafeed.loader.nodes.mixture_stream)."""

    # What the last batch handed out (per topic, timestamps), and, of a mixture, its tokens
    # per source (empty otherwise).
    last_delivered: tuple[dict[str, int], list[int]]
    last_sources: dict[str, int]

    def next(self, batch_size: int) -> Batch | list[Batch] | None:
        ...

    def state(self) -> dict[str, Any]:
        ...

    def batch_state(self) -> tuple[dict[str, Any] | DeferredEntry, dict[str, int]]:
        """The state as of the last batch (maybe deferred) and the next offset per partition key."""
        ...

    def stats(self) -> dict[str, int]:
        ...

    def stop_on(self, stop: threading.Event) -> None:
        ...

    def close(self) -> None:
        ...


class _Stream:
    """One reader's pipeline, composed of its nodes: the reader, an optional shuffle
    buffer and (tokens) the packer. Each saves and restores itself; the stream's state
    nests theirs under ``reader``, ``shuffle`` and ``packer`` (``None`` where it has none)."""

    def __init__(self, settings: LoaderSettings, reader: ShardReader) -> None:
        self.settings = settings
        self.reader = reader
        self.shuffle: ShuffleBuffer[Item] | None = None
        # What the last next() handed out; drained every batch so nothing piles up.
        self.last_delivered: tuple[dict[str, int], list[int]] = ({}, [])
        self.last_sources: dict[str, int] = {}  # one source: no mixture's counts
        self._loaded: dict[str, Any] | None = None
        if settings.shuffle_buffer:
            self.shuffle = ShuffleBuffer(settings.shuffle_buffer, [settings.seed, reader.index])

    # -- state -----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """This reader's entry of the loader state, as of the last batch returned."""
        return {
            "version": NODE_VERSIONS["stream"],
            "index": self.reader.index,
            "reader": self.reader.state(),
            # The (key, offset) reference as is: a tuple, a list once through JSON.
            "shuffle": None if self.shuffle is None else self.shuffle.state(encode=itemgetter(0)),
            "packer": self._packer_state(),
        }

    def batch_state(self) -> tuple[dict[str, Any], dict[str, int]]:
        """:meth:`state` and the next offset per partition key in it."""
        state = self.state()
        return state, {key: int(p["next"]) for key, p in state["reader"]["partitions"].items()}

    def reset(self, entry: dict[str, Any]) -> None:
        """Resume exactly from a reader entry (before :meth:`open`): the reader gets its
        state and the in-flight records to re-read; the shuffle buffer and the packer get
        theirs back once :meth:`open` has re-read those records."""
        check_node(entry, "stream", STREAM_KEYS, f"reader {self.reader.index}'s entry")
        if entry["index"] != self.reader.index:
            raise ResumeMismatch(f"The saved loader state's entry for reader {entry['index']} was "
                                 f"given to reader {self.reader.index}.")
        held = buffered(entry)
        if self.shuffle is None and held:
            raise ResumeMismatch(
                f"The saved loader state's reader {self.reader.index} holds {len(held)} "
                "records in its shuffle buffer, but this loader has shuffle_buffer=0.",
                hint="Resume with the shuffle_buffer it was saved with.")
        in_flight = [(k, int(o)) for k, o in held] + [(k, int(o)) for k, o, _ in carried(entry)]
        self.reader.reset(entry["reader"], in_flight=in_flight)
        self._loaded = entry

    def load_plan(self, plan: dict[str, dict[str, Any]]) -> None:
        """Resume elastically (before :meth:`open`): per-partition positions only."""
        self.reader.load_plan(plan)

    def open(self) -> None:
        self.reader.open()
        entry, self._loaded = self._loaded, None
        if entry is None:
            return
        restored = self.reader.restored()  # records that are gone were logged by the reader
        shuffle = entry["shuffle"]
        if self.shuffle is not None and shuffle is not None:
            items = [[k, int(o)] for k, o in shuffle["items"] if (k, int(o)) in restored]
            # a buffered document partly emitted before an elastic resume goes on after those tokens
            partial = {(k, int(o)): int(e) for k, p in entry["reader"]["partitions"].items()
                       for o, e in p.get("partial", ())}
            self.shuffle.reset(
                {**shuffle, "items": items},
                decode=lambda kv: ((kv[0], kv[1]), restored[(kv[0], kv[1])], partial.get((kv[0], kv[1]), 0)))
        packer = entry["packer"]
        if packer is not None:
            carry = [c for c in packer["carry"] if (c[0], int(c[1])) in restored]
            self._load_packer({**packer, "carry": carry}, restored)

    def _packer_state(self) -> dict[str, Any] | None:
        return None

    def _load_packer(self, state: dict[str, Any], restored: dict[Ref, Any]) -> None:
        pass

    def stats(self) -> dict[str, int]:
        """Records taken, bad records skipped and tokens decoded by this reader."""
        return dict(self.reader.stats)

    def stop_on(self, stop: threading.Event) -> None:
        """Waits for records end once ``stop`` is set (see the reader's stop_on)."""
        self.reader.stop_on(stop)

    def close(self) -> None:
        self.reader.close()

    # -- records ---------------------------------------------------------------------------
    def _next_item(self, wait: float | None = None) -> Item | None:
        if self.shuffle is None:
            return self.reader.next(wait)
        while not self.shuffle.full:
            item = self.reader.next(wait)
            if item is None:
                break
            self.shuffle.add(item)
        return self.shuffle.next() if len(self.shuffle) else None

    def _max_wait(self) -> float | None:
        """``max_wait_s`` where it applies: only an unbounded run waits for records."""
        return None if self.settings.bounded else self.settings.max_wait_s

    @property
    def exhausted(self) -> bool:
        return self.reader.exhausted and not (self.shuffle is not None and len(self.shuffle))

    def _ended(self) -> bool:
        """True once a bounded stream is used up (after refusing a topic of the wrong type)."""
        if not self.exhausted:
            return False
        self.reader.check_decoded()
        return True


class TokenStream(_Stream):
    """Packed windows of ``seq_len + 1`` token ids, ``batch_size`` at a time."""

    def __init__(self, settings: LoaderSettings, reader: ShardReader) -> None:
        super().__init__(settings, reader)
        self.packer = TokenPacker(settings.window, settings.eos)

    def _packer_state(self) -> dict[str, Any] | None:
        return self.packer.state()

    def _load_packer(self, state: dict[str, Any], restored: dict[Ref, Any]) -> None:
        try:
            self.packer.reset(state, fetch=lambda ref: restored[ref])
        except ValueError as exc:  # a carry entry claims more tokens emitted than the record has
            raise ResumeMismatch(f"The saved loader state's packer carry-over does not fit the records "
                                 f"it names ({exc}).", hint=RECREATED_HINT) from None

    def next(self, batch_size: int) -> Batch | None:
        """Up to ``batch_size`` windows; ``None`` once a bounded stream is used up. With
        ``max_wait_s`` (unbounded), fewer whole windows once that long has passed since
        the batch's first token was there."""
        filled = self._fill(batch_size)
        if filled is None:
            return None
        count, pad = filled
        window = self.settings.window
        tokens, starts, finished = self.packer.pop(count, boundaries=self.settings.return_boundaries)
        self.reader.delivered_many(finished)
        self.last_delivered = self.reader.drain_delivered()
        if pad:
            tokens = np.concatenate([tokens, np.full(pad, self.settings.eos, dtype=np.int64)])
            if starts is not None:
                starts = np.concatenate([starts, np.zeros(pad, dtype=np.bool_)])
        batch: Batch = {"tokens": tokens.reshape(-1, window)}
        if starts is not None:
            batch["doc_start"] = starts.reshape(-1, window)
        return batch

    def cut_ahead(self, count: int, spans: list[Span]) -> list[Window] | None:
        """Up to ``count`` windows as :meth:`next` would cut them, uncopied
        (kafeed.loader.nodes.packing.Window), none of their records delivered: ``spans`` gets the
        documents they hold, for the caller to :meth:`deliver` as it hands the windows out
        (kafeed.loader.nodes.windows_ahead). ``None`` once a bounded stream is used up."""
        filled = self._fill(count)
        if filled is None:
            return None
        tokens, pad = filled
        windows = self.packer.pop_windows(tokens, spans)
        if pad:
            windows[-1][0].append(np.full(pad, self.settings.eos, dtype=np.int64))
        return windows

    def deliver(self, refs: list[Ref]) -> tuple[dict[str, int], list[int]]:
        """Mark records whose last token was handed out; returns what was delivered since
        the last drain (records per topic, their Kafka timestamps)."""
        self.reader.delivered_many(refs)
        return self.reader.drain_delivered()

    def _fill(self, batch_size: int) -> tuple[int, int] | None:
        """Read until the packer holds ``batch_size`` windows or the stream ends (or, with
        ``max_wait_s``, the wait is over): (tokens to cut, end-of-document tokens to pad the
        last window with), ``None`` when there is nothing to cut."""
        window = self.settings.window
        need = batch_size * window
        packer = self.packer
        # Once per record: the reader's own next where nothing is shuffled, one call less.
        next_item = self.reader.next if self.shuffle is None else self._next_item
        push = packer.push
        available = packer.available
        max_wait = self._max_wait()
        deadline: float | None = None
        cut = False
        while available < need:
            wait = None
            if max_wait is not None and available:
                now = time.monotonic()
                if deadline is None:
                    deadline = now + max_wait
                if available >= window:  # a partial batch could go now
                    if now >= deadline:
                        cut = True
                        break
                    wait = deadline - now
            item = next_item(wait)
            if item is None:
                if self._ended():
                    break
                continue
            ref, tokens, start = item
            if start and len(tokens) + 1 - start <= 0:
                self.reader.delivered(ref, handed_out=False)
                continue
            available = push(ref, tokens, start)
        count = min(need, available)
        pad = 0
        if cut:
            count -= count % window
        elif count < need:  # a bounded stream's tail
            whole = count - count % window
            if self.settings.drop_last or count == whole:
                count = whole
            else:
                pad = window - count % window
        return (count, pad) if count else None


class SampleStream(_Stream):
    """TrainingSample records as dicts, ``batch_size`` at a time (collated by the dataset)."""

    def next(self, batch_size: int) -> list[dict[str, Any]] | None:
        """Up to ``batch_size`` samples; ``None`` once a bounded stream is used up. With
        ``max_wait_s`` (unbounded), fewer once that long has passed since the first."""
        items: list[Item] = []
        max_wait = self._max_wait()
        deadline: float | None = None
        while len(items) < batch_size:
            wait = None
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    break
            item = self._next_item(wait)
            if item is None:
                if self._ended():
                    break
                continue
            items.append(item)
            if max_wait is not None and deadline is None:
                deadline = time.monotonic() + max_wait
        if not items or (self.settings.drop_last and len(items) < batch_size):
            return None  # a dropped tail stays undelivered: the state still points before it
        out = []
        self.reader.delivered_many([ref for ref, _, _ in items])
        for ref, sample, _ in items:
            topic, _, partition = ref[0].rpartition(":")
            out.append({**sample, "topic": topic, "partition": int(partition), "offset": ref[1]})
        self.last_delivered = self.reader.drain_delivered()
        return out

