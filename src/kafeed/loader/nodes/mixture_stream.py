"""One reader's mixture: a token stream per source, interleaved window by window.

:class:`MixtureStream` runs where a :class:`kafeed.loader.nodes.stream.TokenStream` would (a
DataLoader worker or the main process) and knows nothing about torch. Each batch it asks
the schedule (kafeed.loader.nodes.mixing.MixSchedule) which source each of its rows comes
from, takes that many windows of each source from a block cut ahead of the batches
(kafeed.loader.nodes.windows_ahead: its share of ``AHEAD`` batches; of one batch in an unbounded
run, so that at the end of the log no batch waits for records it does not need), and
copies them into the batch in the schedule's order. A bounded source that runs short is
*dry*: with ``on_dry="end"`` the mixture ends (the short batch is handed out first); with
``"drop"`` the missing rows are picked again from the remaining sources, whose weights
then share its part.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from functools import partial
from typing import Any, cast

import numpy as np

from kafeed.loader.nodes.mixing import ENTRY_KEYS, MixSchedule, OnDry, source_state
from kafeed.loader.nodes.node import NODE_VERSIONS, check_node
from kafeed.loader.nodes.packing import Window
from kafeed.loader.nodes.stream import TokenStream
from kafeed.loader.nodes.windows_ahead import Snapshot, WindowsAhead, entry_at
from kafeed.loader.opening import Topology, open_stream
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.workers.deferred_entry import DeferredEntry
from kafeed.loader.workers.parent import ParentWatch

Batch = dict[str, Any]
AHEAD = 8  # batches' worth of its share that a source cuts at once (kafeed.loader.nodes.windows_ahead)


class MixtureStream:
    """Reader ``topo.index``'s windows from every source at the mixture's proportions."""

    def __init__(self, sources: Mapping[str, LoaderSettings], weights: Mapping[str, float], *,
                 on_dry: OnDry, topo: Topology, saved: dict[str, Any] | None, client_stats: bool,
                 parent: ParentWatch | None) -> None:
        first = next(iter(sources.values()))
        self.window = first.window
        self.eos = first.eos
        self.boundaries = first.return_boundaries
        self.drop_last = first.drop_last
        # A live source cuts one batch ahead: at the end of its log none waits for records it
        # does not need (a file source beside it is bounded all the same).
        self.ahead_batches = AHEAD if all(s.bounded for s in sources.values()) else 1
        self.on_dry = on_dry
        self.index = topo.index
        self.names = sorted(sources)
        self.weights = {name: weight for name, weight in weights.items() if weight > 0}
        self.blocks: dict[tuple[str, int], int] = {}
        self.schedule = MixSchedule(weights, seed=first.seed, index=topo.index)
        self.tokens = dict.fromkeys(self.names, 0)
        self.dry: list[str] = []
        self.last_delivered: tuple[dict[str, int], list[int]] = ({}, [])
        self.last_sources: dict[str, int] = {}
        self.streams: dict[str, TokenStream] = {}
        try:
            for name in self.names:
                # Exact or elastic, each source resumes as a token loader would (kafeed.loader.state.resume).
                sub = source_state(saved, name) if saved is not None else None
                self.streams[name] = cast(TokenStream, open_stream(
                    sources[name], topo, sub, client_stats=client_stats, parent=parent))
        except BaseException:
            self.close()
            raise
        self._resume_mix(saved, topo)
        # Blocks line up with the windows each source handed out, as counted in the state.
        self.ahead = {name: WindowsAhead(self.streams[name], handed=self.tokens[name] // self.window)
                      for name in self.names}

    def _resume_mix(self, saved: dict[str, Any] | None, topo: Topology) -> None:
        if saved is None or not saved["readers"]:
            return
        exact = saved["mode"] != "group" and saved["num_readers"] == topo.count
        if exact:
            entry = saved["readers"][str(topo.index)]
            check_node(entry, "mixture", ENTRY_KEYS, f"reader {topo.index}'s entry")
            self.schedule.reset(entry["schedule"])
            self.tokens = {name: int(entry["tokens"][name]) for name in self.names}
            self.dry = [name for name in self.names if name in entry["dry"]]
        elif topo.index == 0:  # elastic: the counts so far live on on the first reader
            for reader in saved["readers"].values():
                for name in self.names:
                    self.tokens[name] += int(reader["tokens"][name])

    @property
    def ended(self) -> bool:
        return self.on_dry == "end" and bool(self.dry)

    # -- batches ---------------------------------------------------------------------------
    def _block(self, name: str, batch_size: int) -> int:
        """Windows cut at once from ``name``: its share of ``ahead_batches`` batches."""
        block = self.blocks.get((name, batch_size))
        if block is None:
            share = self.weights.get(name, 0.0) / sum(self.weights.values())
            block = max(1, math.ceil(share * batch_size * self.ahead_batches))
            self.blocks[(name, batch_size)] = block
        return block

    def next(self, batch_size: int) -> Batch | None:
        """Up to ``batch_size`` windows; ``None`` once the mixture has ended."""
        order: list[Window] = []
        per_topic: dict[str, int] = {}
        stamps: list[int] = []
        sources: dict[str, int] = {}
        window = self.window
        while len(order) < batch_size and not self.ended:
            picks = self.schedule.pick(batch_size - len(order), self.dry)
            if not picks:
                break
            got: dict[str, list[Window]] = {}
            for name in self.names:  # in name order: a source found dry joins the list in it
                wanted = picks.count(name)
                if not wanted:
                    continue
                ahead = self.ahead[name]
                taken = ahead.take(wanted, self._block(name, batch_size))
                topics, drained = ahead.last_delivered
                for topic, count in topics.items():
                    per_topic[topic] = per_topic.get(topic, 0) + count
                stamps += drained
                sources[name] = sources.get(name, 0) + len(taken) * window
                if len(taken) < wanted:
                    self.dry.append(name)
                taken.reverse()
                got[name] = taken
            for name in picks:  # the schedule's order, less the rows a dry source did not have
                taken = got[name]
                if taken:
                    order.append(taken.pop())
        if not order or (self.drop_last and len(order) < batch_size):
            return None
        self.last_delivered = (per_topic, stamps)
        self.last_sources = sources
        for name, delivered in sources.items():
            self.tokens[name] += delivered
        return self._assemble(order)

    def _assemble(self, order: list[Window]) -> Batch:
        """One (n, window) array of the windows in order: the one copy of the batch's tokens."""
        tokens = np.empty((len(order), self.window), dtype=np.int64)
        np.concatenate([piece for pieces, _ in order for piece in pieces], out=tokens.reshape(-1))
        batch: Batch = {"tokens": tokens}
        if self.boundaries:
            starts = np.zeros((len(order), self.window), dtype=np.bool_)
            window = self.window
            at = [row * window + first for row, (_, firsts) in enumerate(order) for first in firsts]
            starts.reshape(-1)[at] = True
            batch["doc_start"] = starts
        return batch

    # -- state -----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """This reader's mixture entry (kafeed.loader.nodes.mixing), as of the last batch returned."""
        return {
            "version": NODE_VERSIONS["mixture"],
            "index": self.index,
            "sources": {name: self.ahead[name].state() for name in self.names},
            "schedule": self.schedule.state(),
            "tokens": dict(self.tokens),
            "dry": list(self.dry),
        }

    def batch_state(self) -> tuple[DeferredEntry, dict[str, int]]:
        """This reader's entry as of the last batch, deferred (built when a state is asked
        for; kafeed.loader.nodes.windows_ahead), and the next offset per partition key."""
        snapshots = [self.ahead[name].snapshot() for name in self.names]
        mix = (dict(self.schedule.credits), dict(self.tokens), list(self.dry))
        positions = {p.key: p.next_offset() for stream in self.streams.values() for p in stream.reader.parts}
        return DeferredEntry(partial(self._entry_at, snapshots, mix)), positions

    def _entry_at(self, snapshots: list[Snapshot],
                  mix: tuple[dict[str, float], dict[str, int], list[str]]) -> dict[str, Any]:
        credits, tokens, dry = mix
        return {
            "version": NODE_VERSIONS["mixture"],
            "index": self.index,
            "sources": {name: entry_at(snapshot, self.window)
                        for name, snapshot in zip(self.names, snapshots, strict=True)},
            "schedule": {"version": NODE_VERSIONS["schedule"], "weights": dict(self.schedule.weights),
                         "credits": dict(credits)},
            "tokens": dict(tokens),
            "dry": list(dry),
        }

    def stats(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for stream in self.streams.values():
            for key, value in stream.stats().items():
                totals[key] = totals.get(key, 0) + value
        return totals

    def stop_on(self, stop: threading.Event) -> None:
        for stream in self.streams.values():
            stream.stop_on(stop)

    def close(self) -> None:
        for stream in self.streams.values():
            stream.close()
