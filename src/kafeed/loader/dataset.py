"""The torch datasets: :class:`KafkaTokenDataset` and :class:`KafkaSampleDataset`.

Each DataLoader worker (or the main process with ``num_workers=0``) is one reader with
its own Kafka consumer, created inside the worker when iteration starts. Both datasets
implement the ``Stateful`` protocol (``state_dict`` / ``load_state_dict``), so torchdata's
``StatefulDataLoader`` can checkpoint them; :class:`kafeed.StreamLoader` is the faster,
batch-at-a-time way (see docs/loader.md). Iterated directly, they yield dicts, as
StreamLoader does: one per window or sample.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import IterableDataset, get_worker_info

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.loader.nodes.collate import Collate, collate_samples, token_batch
from kafeed.loader.nodes.delivered import Delivered
from kafeed.loader.nodes.stream import BatchStream
from kafeed.loader.opening import MAIN_PROCESS, Stream, Topology, open_stream, state_key
from kafeed.loader.settings import Kind, LoaderSettings, loader_settings
from kafeed.loader.state.checkpoint import check_state, empty_state, next_epoch, plain_copy
from kafeed.loader.state.rank_states import loadable_state
from kafeed.loader.workers.deferred_entry import packed
from kafeed.loader.workers.parent import ParentWatch, watch_parent
from kafeed.loader.workers.worker_error import WorkerError

__all__ = [
    "Collate",
    "KafkaDatasetBase",
    "KafkaSampleDataset",
    "KafkaTokenDataset",
    "WorkerError",
    "collate_samples",
    "loader_settings",
    "rank_and_world",
    "token_batch",
]


def rank_and_world(settings: LoaderSettings) -> tuple[int, int]:
    """Explicit ``rank``/``world_size``, else torch.distributed's when initialized, else (0, 1)."""
    if settings.rank is not None and settings.world_size is not None:
        return settings.rank, settings.world_size
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


log = logging.getLogger("kafeed")


def _same(state: dict[str, Any]) -> dict[str, Any]:
    return state



class KafkaDatasetBase(IterableDataset[Any]):
    """What both datasets share: topology, resume choice, state, epochs.

    A second iteration continues where the first one stopped; once a bounded run was
    iterated to its end, the next iteration is a new epoch (kafeed.loader.state.checkpoint.next_epoch).
    """

    kind: Kind

    def __init__(self, settings: LoaderSettings) -> None:
        super().__init__()
        self.settings = settings
        self._loaded: dict[str, Any] | None = None
        self._stream: BatchStream | None = None
        self._topology: Topology | None = None
        self._finished = False
        self._adopted: tuple[Stream, str] | None = None

    # -- topology and streams --------------------------------------------------------------
    def topology(self) -> Topology:
        rank, world = rank_and_world(self.settings)
        info = get_worker_info()
        if info is None:
            return Topology(rank, world, 0, 1)
        return Topology(rank, world, info.id, info.num_workers)

    def adopt(self, stream: Stream, saved: dict[str, Any] | None) -> None:
        """Use ``stream``, opened ahead by :func:`kafeed.loader.opening.open_stream` from
        ``saved``, for the next iteration in the main process, if that iteration resumes from
        exactly ``saved``; otherwise it is closed and a stream is opened as usual."""
        self._drop_adopted()
        self._adopted = (stream, state_key(saved))

    def _drop_adopted(self) -> None:
        if self._adopted is not None:
            self._adopted[0].close()
            self._adopted = None

    def _open_stream(self, topo: Topology, origin: int | None = None) -> BatchStream:
        saved = self._loaded
        if self._stream is not None:
            saved = next_epoch(self.state_dict()) if self._finished else self.state_dict()
        in_worker = get_worker_info() is not None
        stream: BatchStream
        if self._adopted is not None and topo == MAIN_PROCESS and not in_worker \
                and self._adopted[1] == state_key(saved):
            stream, self._adopted = self._adopted[0], None
        else:
            if self._adopted is not None:
                log.debug("kafeed loader: the stream opened ahead was opened from another state; reopening")
            self._drop_adopted()
            # Only the main process's registry is served: workers' client statistics would be lost.
            stream = self._make_stream(topo, saved, client_stats=not in_worker,
                                       parent=watch_parent(origin) if in_worker else None)
        self._stream = stream
        self._topology = topo
        self._finished = False
        return stream

    def _make_stream(self, topo: Topology, saved: dict[str, Any] | None, *, client_stats: bool,
                     parent: ParentWatch | None) -> BatchStream:
        """This reader's stream, resumed from ``saved`` and opened."""
        return open_stream(self.settings, topo, saved, client_stats=client_stats, parent=parent)

    def empty_state(self) -> dict[str, Any]:
        """The state of this dataset before anything was read."""
        return empty_state(self.settings)

    def check_state(self, state: Any) -> dict[str, Any]:
        """``state`` (one rank's, merged, or every rank's: kafeed.loader.state.rank_states) validated
        against this dataset (see kafeed.loader.state.checkpoint.check_state)."""
        return check_state(loadable_state(state), self.settings)

    def _convert(self, batch: Any, collate: Collate | None, views: bool) -> Any:
        """A batch of the stream as the loader hands it out; ``views``: a token batch with its
        ``input_ids`` and ``labels`` views (:func:`token_batch`)."""
        raise NotImplementedError

    def _single_items(self) -> Iterator[Any]:
        """Batches of one from this reader's stream (plain iteration, no DataLoader)."""
        stream = self._open_stream(self.topology())
        try:
            while (batch := stream.next(1)) is not None:
                yield batch
            self._finished = True
        finally:
            stream.close()

    def iter_batches(self, batch_size: int, *, skip_first: bool = False, origin: int | None = None,
                     collate: Collate | None = None, stop: threading.Event | None = None,
                     views: bool = False) -> Iterator[tuple[int, Any, Any, Delivered]]:
        """Yield ``(worker, batch, reader_state, delivered)`` (the state packed by a
        DataLoader worker, as a fresh dict in the main process): first one state-only item
        (batch ``None``), one more placeholder when ``skip_first`` (round-robin alignment on
        resume), then the batches, each with this reader's state as of that batch and what
        it handed out (for the metrics, which the main process updates). ``collate`` turns a
        list of sample dicts into a batch (sample datasets; default :func:`collate_samples`).
        ``views``: token batches come with their ``input_ids`` and ``labels`` views, made
        here, in the main process only (a worker's batch crosses without them).

        In a DataLoader worker, a :class:`KafeedError` ends the iteration as one last item
        whose batch is a :class:`WorkerError`, for StreamLoader to raise as it was. ``origin``:
        the pid of the process iterating the DataLoader (see kafeed.loader.workers.parent). ``stop``:
        set by another thread to end the iteration, even while the reader waits for records
        (it raises kafeed.loader.workers.prefetch.Stopped then). The worker's error item is
        made here too, not by a generator around this one: each is a step of every batch
        (docs/loader.md, "One record's path")."""
        info = get_worker_info()
        topo = self.topology()
        # A worker's state crosses to the main process packed (kafeed.loader.workers.deferred_entry);
        # in the main process the stream's state_dict() is already a fresh snapshot (new
        # containers every call), and serialising it per batch was a tenth of the trainer's
        # data-wait (bench_data_wait.py).
        in_worker = info is not None
        snapshot: Callable[[dict[str, Any]], Any] = packed if in_worker else _same
        views = views and not in_worker
        try:
            stream = self._open_stream(topo, origin)
            try:
                if stop is not None:
                    stream.stop_on(stop)
                state = stream.state()
                yield topo.worker, None, snapshot(state), Delivered.of(({}, []), state)
                if skip_first:
                    yield topo.worker, None, "", Delivered()
                while True:
                    batch = stream.next(batch_size)
                    if batch is None:
                        self._finished = True
                        return
                    sources = stream.last_sources
                    if in_worker:
                        state = stream.state()
                        yield (topo.worker, self._convert(batch, collate, False), packed(state),
                               Delivered.of(stream.last_delivered, state, sources))
                        continue
                    # In the main process a mixture's entry comes deferred, built only when a
                    # state is asked for (kafeed.loader.workers.deferred_entry).
                    entry, positions = stream.batch_state()
                    yield (topo.worker, self._convert(batch, collate, views), entry,
                           Delivered.at(stream.last_delivered, positions, sources))
            finally:
                stream.close()
        except KafeedError as exc:
            if info is None:
                raise
            yield info.id, WorkerError.of(exc, info.id), "", Delivered()

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This dataset's readers as of the last item it yielded (JSON data; see
        kafeed.loader.state.checkpoint). Before any iteration: the loaded state, or an empty one."""
        if self._stream is None or self._topology is None:
            return copy.deepcopy(self._loaded) if self._loaded is not None else self.empty_state()
        state = self.empty_state()
        state["num_readers"] = self._topology.count
        state["readers"] = {str(self._topology.index): self._stream.state()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state`` at the next iteration. A state that is malformed or taken
        with other settings raises :class:`kafeed.ResumeMismatch` here (see
        kafeed.loader.state.checkpoint.check_state); one that does not fit the topic, when a reader
        opens, before anything is fetched."""
        self._loaded = self.check_state(plain_copy(state))
        self._stream = None
        self._finished = False

    def stats(self) -> dict[str, int]:
        """Records taken, bad records skipped and tokens decoded by the live reader."""
        return self._stream.stats() if self._stream is not None else {}



class KafkaTokenDataset(KafkaDatasetBase):
    """Packed windows of ``seq_len + 1`` token ids from TokenizedDocument topics.

    ``KafkaTokenDataset("tokens", seq_len=2048, eos_id=50256, shuffle_buffer=1000)``, or
    ``KafkaTokenDataset(settings=LoaderSettings(...))``: every keyword besides ``topics``,
    ``settings``, ``bootstrap`` and ``connection`` is a :class:`LoaderSettings` field,
    validated there (``seq_len`` and ``eos_id`` are required). Documents are joined with
    ``eos_id`` after each one and cut into back-to-back windows (a window may span
    documents). Iterating yields one dict per window: ``tokens`` (``seq_len + 1`` int64),
    ``input_ids``, ``labels`` and, with ``return_boundaries=True``, ``doc_start`` (True where
    a document's first token sits). The last window of a bounded run is padded with
    ``eos_id`` unless ``drop_last``. See docs/loader.md for every setting.
    """

    kind: Kind = "tokens"

    def __init__(self, topics: str | Sequence[str] | None = None, *, settings: LoaderSettings | None = None,
                 bootstrap: str | None = None, connection: ConnectionSettings | None = None,
                 **options: Any) -> None:
        super().__init__(loader_settings("tokens", topics, settings, bootstrap, connection, options))

    def _convert(self, batch: Any, collate: Collate | None, views: bool) -> Any:
        tokens = torch.from_numpy(batch["tokens"])
        starts = batch.get("doc_start")
        if views:
            return token_batch(tokens, None if starts is None else torch.from_numpy(starts))
        out = {"tokens": tokens}
        if starts is not None:
            out["doc_start"] = torch.from_numpy(starts)
        return out

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for batch in self._single_items():
            starts = batch.get("doc_start")
            yield token_batch(torch.from_numpy(batch["tokens"][0]),
                              None if starts is None else torch.from_numpy(starts[0]))


class KafkaSampleDataset(KafkaDatasetBase):
    """TrainingSample records (classification / regression) as dicts.

    ``KafkaSampleDataset("raw", shuffle_buffer=100)`` or ``settings=LoaderSettings(kind=
    "samples", ...)``; keywords as for :class:`KafkaTokenDataset`. Iterating yields one dict
    per record (``input`` bytes, ``targets`` float32 array, ``id``, ``metadata``, ``source``,
    ``timestamp``, ``topic``, ``partition``, ``offset``); batch them with
    :func:`collate_samples` (what :class:`kafeed.StreamLoader` does by default).
    """

    kind: Kind = "samples"

    def __init__(self, topics: str | Sequence[str] | None = None, *, settings: LoaderSettings | None = None,
                 bootstrap: str | None = None, connection: ConnectionSettings | None = None,
                 **options: Any) -> None:
        super().__init__(loader_settings("samples", topics, settings, bootstrap, connection, options))

    def _convert(self, batch: Any, collate: Collate | None, views: bool) -> Any:
        return (collate or collate_samples)(batch)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batch in self._single_items():
            yield batch[0]
