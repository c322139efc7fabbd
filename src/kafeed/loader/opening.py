"""Opening one reader's stream, without torch: where it sits, what it resumes from.

The datasets open their streams through :func:`open_stream` when iteration starts. A
trainer may open the main process's stream earlier, before torch is imported, so that
librdkafka's own threads fetch the first records while the rest of the program loads;
the dataset then adopts it (:meth:`kafeed.loader.dataset.KafkaDatasetBase.adopt`) only
if it was opened from exactly the state the dataset would resume from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kafeed.loader.nodes.readers import make_reader
from kafeed.loader.nodes.record_kinds import KINDS
from kafeed.loader.nodes.stream import SampleStream, TokenStream
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.resume import choose_resume
from kafeed.loader.workers.at_exit import close_at_exit
from kafeed.loader.workers.parent import ParentWatch

Stream = TokenStream | SampleStream


@dataclass(frozen=True)
class Topology:
    """Where this reader sits: rank of world size, DataLoader worker of num_workers."""

    rank: int
    world_size: int
    worker: int
    num_workers: int

    @property
    def index(self) -> int:
        return self.rank * self.num_workers + self.worker

    @property
    def count(self) -> int:
        return self.world_size * self.num_workers


MAIN_PROCESS = Topology(0, 1, 0, 1)  # one rank, no DataLoader workers


def state_key(saved: dict[str, Any] | None) -> str:
    """A canonical text of the state a stream is opened from, to compare two of them."""
    return json.dumps(saved, sort_keys=True)


def open_stream(settings: LoaderSettings, topo: Topology, saved: dict[str, Any] | None, *,
                client_stats: bool, parent: ParentWatch | None = None) -> Stream:
    """The stream of reader ``topo.index`` of ``topo.count``, resumed from ``saved`` (a checked
    loader state, or None for a fresh start), opened: its consumer is assigned and fetching."""
    resume = choose_resume(saved, mode=settings.mode, index=topo.index, count=topo.count,
                           rank=topo.rank, worker=topo.worker)
    reader = make_reader(settings, index=topo.index, count=topo.count, client_stats=client_stats,
                         parent=parent)
    kind = TokenStream if KINDS[settings.kind].packs else SampleStream
    stream: Stream = kind(settings, reader)
    if resume.entry is not None:
        stream.reset(resume.entry)
    elif resume.plan is not None:
        stream.load_plan(resume.plan)
        reader.stats.update(resume.stats)  # in place: a decoder may count into the same dict
    reader.known = resume.known
    stream.open()
    close_at_exit(stream)
    return stream
