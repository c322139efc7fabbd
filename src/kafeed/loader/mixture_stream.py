"""One reader's mixture: a token stream per source, interleaved window by window.

:class:`MixtureStream` runs where a :class:`kafeed.loader.stream.TokenStream` would (a
DataLoader worker or the main process) and knows nothing about torch. Each batch it asks
the schedule (kafeed.loader.mixing.MixSchedule) which source each of its rows comes
from, takes that many windows from each source's stream in one call, and places them in
the schedule's order. A bounded source that runs short is *dry*: with ``on_dry="end"``
the mixture ends (the short batch is handed out first); with ``"drop"`` the missing rows
are picked again from the remaining sources, whose weights then share its part.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from kafeed.loader.mixing import MixSchedule, OnDry, source_state
from kafeed.loader.opening import Topology, open_stream
from kafeed.loader.parent import ParentWatch
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.stream import TokenStream

Batch = dict[str, Any]


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
        self.on_dry = on_dry
        self.index = topo.index
        self.names = sorted(sources)
        self.schedule = MixSchedule(weights, seed=first.seed, index=topo.index)
        self.tokens = dict.fromkeys(self.names, 0)
        self.dry: list[str] = []
        self.last_delivered: tuple[dict[str, int], list[int]] = ({}, [])
        self.last_sources: dict[str, int] = {}
        self.streams: dict[str, TokenStream] = {}
        try:
            for name in self.names:
                # Exact or elastic, each source resumes as a token loader would (kafeed.loader.resume).
                sub = source_state(saved, name) if saved is not None else None
                self.streams[name] = cast(TokenStream, open_stream(
                    sources[name], topo, sub, client_stats=client_stats, parent=parent))
        except BaseException:
            self.close()
            raise
        self._resume_mix(saved, topo)

    def _resume_mix(self, saved: dict[str, Any] | None, topo: Topology) -> None:
        if saved is None or not saved["readers"]:
            return
        exact = saved["mode"] != "group" and saved["num_readers"] == topo.count
        if exact:
            mix = saved["readers"][str(topo.index)]["mix"]
            self.schedule.load_state_dict(mix)
            self.tokens = {name: int(mix["tokens"][name]) for name in self.names}
            self.dry = [name for name in self.names if name in mix["dry"]]
        elif topo.index == 0:  # elastic: the counts so far live on on the first reader
            for reader in saved["readers"].values():
                for name in self.names:
                    self.tokens[name] += int(reader["mix"]["tokens"][name])

    @property
    def ended(self) -> bool:
        return self.on_dry == "end" and bool(self.dry)

    # -- batches ---------------------------------------------------------------------------
    def next_batch(self, batch_size: int) -> Batch | None:
        """Up to ``batch_size`` windows; ``None`` once the mixture has ended."""
        order: list[str] = []
        rows: dict[str, list[Batch]] = {name: [] for name in self.names}
        per_topic: dict[str, int] = {}
        stamps: list[int] = []
        while len(order) < batch_size and not self.ended:
            picks = self.schedule.pick(batch_size - len(order), self.dry)
            if not picks:
                break
            wanted = Counter(picks)
            got: dict[str, int] = {}
            for name in self.names:
                if not wanted[name]:
                    continue
                batch = self.streams[name].next_batch(wanted[name])
                got[name] = 0 if batch is None else len(batch["tokens"])
                if batch is not None:
                    rows[name].append(batch)
                    drained_topics, drained_stamps = self.streams[name].last_delivered
                    for topic, count in drained_topics.items():
                        per_topic[topic] = per_topic.get(topic, 0) + count
                    stamps.extend(drained_stamps)
                if got[name] < wanted[name]:
                    self.dry.append(name)
            for name in picks:  # the schedule's order, less the rows a dry source did not have
                if got[name]:
                    got[name] -= 1
                    order.append(name)
        if not order or (self.drop_last and len(order) < batch_size):
            return None
        self.last_delivered = (per_topic, stamps)
        return self._assemble(order, rows)

    def _assemble(self, order: list[str], rows: dict[str, list[Batch]]) -> Batch:
        """One (n, window) array with each source's rows where the schedule put them."""
        where = np.array([self.names.index(name) for name in order])
        tokens = np.empty((len(order), self.window), dtype=np.int64)
        starts = np.empty((len(order), self.window), dtype=np.bool_) if self.boundaries else None
        self.last_sources = {}
        for i, name in enumerate(self.names):
            if not rows[name]:
                continue
            mine = np.flatnonzero(where == i)
            parts = [b["tokens"] for b in rows[name]]
            tokens[mine] = parts[0] if len(parts) == 1 else np.concatenate(parts)
            if starts is not None:
                starts[mine] = np.concatenate([b["doc_start"] for b in rows[name]])
            delivered = len(mine) * self.window
            self.tokens[name] += delivered
            self.last_sources[name] = delivered
        batch: Batch = {"tokens": tokens}
        if starts is not None:
            batch["doc_start"] = starts
        return batch

    # -- state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This reader's mixture entry (kafeed.loader.mixing), as of the last batch returned."""
        return {
            "index": self.index,
            "sources": {name: self.streams[name].state_dict() for name in self.names},
            "mix": {**self.schedule.state_dict(), "tokens": dict(self.tokens), "dry": list(self.dry)},
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
