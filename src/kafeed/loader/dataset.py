"""The torch datasets: :class:`KafkaTokenDataset` and :class:`KafkaSampleDataset`.

Each DataLoader worker (or the main process with ``num_workers=0``) is one reader with
its own Kafka consumer, created inside the worker when iteration starts. Both datasets
implement the ``Stateful`` protocol (``state_dict`` / ``load_state_dict``), so torchdata's
``StatefulDataLoader`` can checkpoint them; :class:`kafeed.StreamLoader` is the faster,
batch-at-a-time way (see docs/loader.md).
"""

from __future__ import annotations

import copy
import json
import logging
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, KafeedError, ResumeMismatch, invalid_settings
from kafeed.loader.parent import watch_parent
from kafeed.loader.reader import KafkaReader
from kafeed.loader.settings import EndSpec, LoaderSettings, Mode, OffsetSpec
from kafeed.loader.state import check_state, empty_state, partition_plan, plain_copy
from kafeed.loader.stream import (
    Delivered,
    SampleStream,
    TokenStream,
    starts_from_plan,
    starts_from_reader_state,
)

log = logging.getLogger("kafeed")


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


def rank_and_world(settings: LoaderSettings) -> tuple[int, int]:
    """Explicit ``rank``/``world_size``, else torch.distributed's when initialized, else (0, 1)."""
    if settings.rank is not None and settings.world_size is not None:
        return settings.rank, settings.world_size
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def collate_samples(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Batch TrainingSample dicts: ``targets`` is a (B, T) float32 tensor (ragged rows padded
    with NaN); ``input`` (bytes), ``text`` (UTF-8, errors replaced), ``id``, ``metadata``,
    ``topic``, ``partition`` and ``offset`` are lists."""
    width = max((len(s["targets"]) for s in samples), default=0)
    targets = np.full((len(samples), width), np.nan, dtype=np.float32)
    for row, s in enumerate(samples):
        targets[row, : len(s["targets"])] = s["targets"]
    return {
        "targets": torch.from_numpy(targets),
        "input": [s["input"] for s in samples],
        "text": [bytes(s["input"]).decode("utf-8", errors="replace") for s in samples],
        "id": [s["id"] for s in samples],
        "metadata": [s["metadata"] for s in samples],
        "topic": [s["topic"] for s in samples],
        "partition": [s["partition"] for s in samples],
        "offset": [s["offset"] for s in samples],
    }


@dataclass(frozen=True)
class WorkerError:
    """A :class:`KafeedError` raised in a DataLoader worker, sent to the main process as data.

    DataLoader re-raises a worker's exception as ``type(exc)(traceback text)``, which loses
    the message's shape, the hint and the code; this carries them so the caller gets the
    error exactly as it was raised.
    """

    kind: type[KafeedError]
    message: str
    hint: str | None
    code: int | None
    worker: int
    trace: str

    @classmethod
    def of(cls, exc: KafeedError, worker: int) -> WorkerError:
        return cls(type(exc), exc.message, exc.hint, exc.code, worker, traceback.format_exc())

    def error(self) -> KafeedError:
        return self.kind(self.message, hint=self.hint, code=self.code)


class KafkaDatasetBase(IterableDataset[Any]):
    """What both datasets share: topology, resume choice, state."""

    def __init__(self, settings: LoaderSettings) -> None:
        super().__init__()
        self.settings = settings
        self._loaded: dict[str, Any] | None = None
        self._stream: TokenStream | SampleStream | None = None
        self._topology: Topology | None = None

    # -- topology and streams --------------------------------------------------------------
    def topology(self) -> Topology:
        rank, world = rank_and_world(self.settings)
        info = get_worker_info()
        if info is None:
            return Topology(rank, world, 0, 1)
        return Topology(rank, world, info.id, info.num_workers)

    def _open_stream(self, topo: Topology, origin: int | None = None) -> TokenStream | SampleStream:
        # A second iteration continues where the first one stopped.
        saved = self.state_dict() if self._stream is not None else self._loaded
        exact: dict[str, Any] | None = None
        starts = None
        if saved is not None and saved["readers"]:
            if self.settings.mode != "group" and saved["num_readers"] == topo.count:
                exact = saved["readers"].get(str(topo.index))
                if exact is None:
                    raise ResumeMismatch(
                        f"The saved loader state has no entry for reader {topo.index} "
                        f"(rank {topo.rank}, worker {topo.worker}).",
                        hint="Load the state this rank saved, or merge_states() of every rank.")
                if self.settings.shuffle_buffer == 0 and exact["buffer"]:
                    raise ResumeMismatch(
                        f"The saved loader state's reader {topo.index} holds {len(exact['buffer'])} "
                        "records in its shuffle buffer, but this loader has shuffle_buffer=0.",
                        hint="Resume with the shuffle_buffer it was saved with.")
                starts = starts_from_reader_state(exact)
            else:
                if self.settings.mode != "group" and len(saved["readers"]) != saved["num_readers"]:
                    raise ResumeMismatch(
                        f"Resuming {saved['num_readers']} readers' state with {topo.count} readers needs "
                        f"every reader's entry; this state has {len(saved['readers'])}.",
                        hint="Save merge_states() of all ranks (all_gather_object) and load that.")
                starts = starts_from_plan(partition_plan(saved))
                if topo.index == 0:
                    log.info("kafeed loader: elastic resume from %s to %d readers",
                             saved["num_readers"], topo.count)
        in_worker = get_worker_info() is not None
        # Only the main process's registry is served: workers' client statistics would be lost.
        reader = KafkaReader(self.settings, index=topo.index, count=topo.count, starts=starts,
                             client_stats=not in_worker, parent=watch_parent(origin) if in_worker else None)
        stream: TokenStream | SampleStream
        if self.settings.kind == "tokens":
            stream = TokenStream(self.settings, reader, exact)
        else:
            stream = SampleStream(self.settings, reader, exact)
        stream.open()
        self._stream = stream
        self._topology = topo
        return stream

    def _convert(self, batch: Any) -> Any:
        raise NotImplementedError

    def _single_items(self) -> Iterator[Any]:
        """Batches of one from this reader's stream (plain iteration, no DataLoader)."""
        stream: Any = self._open_stream(self.topology())
        try:
            while (batch := stream.next_batch(1)) is not None:
                yield batch
        finally:
            stream.close()

    def iter_batches(self, batch_size: int, *, skip_first: bool = False,
                     origin: int | None = None) -> Iterator[tuple[int, Any, str, Delivered]]:
        """Yield ``(worker, batch, reader_state_json, delivered)``: first one state-only item
        (batch ``None``), one more placeholder when ``skip_first`` (round-robin alignment on
        resume), then the batches, each with this reader's state as of that batch and what
        it handed out (for the metrics, which the main process updates).

        In a DataLoader worker, a :class:`KafeedError` ends the iteration as one last item
        whose batch is a :class:`WorkerError`, for StreamLoader to raise as it was. ``origin``:
        the pid of the process iterating the DataLoader (see kafeed.loader.parent)."""
        batches = self._batches(batch_size, skip_first, origin)
        info = get_worker_info()
        if info is None:
            yield from batches
            return
        try:
            yield from batches
        except KafeedError as exc:
            yield info.id, WorkerError.of(exc, info.id), "", Delivered()

    def _batches(self, batch_size: int, skip_first: bool,
                 origin: int | None) -> Iterator[tuple[int, Any, str, Delivered]]:
        topo = self.topology()
        stream = self._open_stream(topo, origin)
        try:
            state = stream.state()
            yield topo.worker, None, json.dumps(state), Delivered.of(({}, []), state)
            if skip_first:
                yield topo.worker, None, "", Delivered()
            while True:
                batch = stream.next_batch(batch_size)
                if batch is None:
                    return
                state = stream.state()
                yield (topo.worker, self._convert(batch), json.dumps(state),
                       Delivered.of(stream.last_delivered, state))
        finally:
            stream.close()

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This dataset's readers as of the last item it yielded (JSON data; see
        kafeed.loader.state). Before any iteration: the loaded state, or an empty one."""
        if self._stream is None or self._topology is None:
            return copy.deepcopy(self._loaded) if self._loaded is not None else empty_state(self.settings)
        state = empty_state(self.settings)
        state["num_readers"] = self._topology.count
        state["readers"] = {str(self._topology.index): self._stream.state()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state`` at the next iteration. A state that is malformed or taken
        with other settings raises :class:`kafeed.ResumeMismatch` here (see
        kafeed.loader.state.check_state); one that does not fit the topic, when a reader
        opens, before anything is fetched."""
        self._loaded = check_state(plain_copy(state), self.settings)
        self._stream = None

    def stats(self) -> dict[str, int]:
        """Records taken, bad records skipped and tokens decoded by the live reader."""
        return dict(self._stream.reader.stats) if self._stream is not None else {}


def _settings(topics: str | Sequence[str], kind: Literal["tokens", "samples"], bootstrap: str | None,
              connection: ConnectionSettings | None, **kwargs: Any) -> LoaderSettings:
    if bootstrap is not None and connection is not None:
        raise ConfigError("Pass bootstrap= or connection=, not both.")
    conn = connection or (ConnectionSettings(bootstrap=bootstrap) if bootstrap else ConnectionSettings())
    names = (topics,) if isinstance(topics, str) else tuple(topics)
    try:
        return LoaderSettings(topics=names, kind=kind, connection=conn, **kwargs)
    except ValueError as exc:
        raise invalid_settings(exc, what="loader settings") from None


class KafkaTokenDataset(KafkaDatasetBase):
    """Packed windows of ``seq_len + 1`` token ids from TokenizedDocument topics.

    Documents are joined with ``eos_id`` after each one and cut into back-to-back windows
    (a window may span documents). Iterating yields one int64 tensor of ``seq_len + 1``
    per window, or ``(tokens, doc_start)`` with ``return_boundaries=True`` (``doc_start``
    is True where a document's first token sits). The last window of a bounded run is
    padded with ``eos_id`` unless ``drop_last``. See docs/loader.md for every argument.
    """

    def __init__(
        self, topics: str | Sequence[str], *, seq_len: int, bootstrap: str | None = None,
        connection: ConnectionSettings | None = None, start: OffsetSpec = "earliest",
        end: EndSpec = "latest", shuffle_buffer: int = 0, seed: int = 0, eos_id: int = 0,
        return_boundaries: bool = False, drop_last: bool = False, tokenizer: str | None = None,
        rank: int | None = None, world_size: int | None = None, group: str | None = None,
        mode: Mode = "static", dlq_topic: str | None = None, consume_batch: int = 2000,
        queue_records: int = 8000, poll_timeout_s: float = 0.5, broker_timeout_s: float | None = None,
        consumer_config: Mapping[str, str | int | float | bool] | None = None,
    ) -> None:
        super().__init__(_settings(
            topics, "tokens", bootstrap, connection, seq_len=seq_len, start=start, end=end,
            shuffle_buffer=shuffle_buffer, seed=seed, eos_id=eos_id, return_boundaries=return_boundaries,
            drop_last=drop_last, tokenizer=tokenizer, rank=rank, world_size=world_size, group=group,
            mode=mode, dlq_topic=dlq_topic, consume_batch=consume_batch, queue_records=queue_records,
            poll_timeout_s=poll_timeout_s, broker_timeout_s=broker_timeout_s,
            consumer_config=dict(consumer_config or {})))

    def _convert(self, batch: Any) -> Any:
        out = {"tokens": torch.from_numpy(batch["tokens"])}
        if "doc_start" in batch:
            out["doc_start"] = torch.from_numpy(batch["doc_start"])
        return out

    def __iter__(self) -> Iterator[Any]:
        for batch in self._single_items():
            tokens = torch.from_numpy(batch["tokens"][0])
            if self.settings.return_boundaries:
                yield tokens, torch.from_numpy(batch["doc_start"][0])
            else:
                yield tokens


class KafkaSampleDataset(KafkaDatasetBase):
    """TrainingSample records (classification / regression) as dicts.

    Iterating yields one dict per record (``input`` bytes, ``targets`` float32 array, ``id``,
    ``metadata``, ``source``, ``timestamp``, ``topic``, ``partition``, ``offset``); batch them
    with :func:`collate_samples` (what :class:`kafeed.StreamLoader` does).
    """

    def __init__(
        self, topics: str | Sequence[str], *, bootstrap: str | None = None,
        connection: ConnectionSettings | None = None, start: OffsetSpec = "earliest",
        end: EndSpec = "latest", shuffle_buffer: int = 0, seed: int = 0, drop_last: bool = False,
        rank: int | None = None, world_size: int | None = None, group: str | None = None,
        mode: Mode = "static", dlq_topic: str | None = None, consume_batch: int = 2000,
        queue_records: int = 8000, poll_timeout_s: float = 0.5, broker_timeout_s: float | None = None,
        consumer_config: Mapping[str, str | int | float | bool] | None = None,
    ) -> None:
        super().__init__(_settings(
            topics, "samples", bootstrap, connection, start=start, end=end,
            shuffle_buffer=shuffle_buffer, seed=seed, drop_last=drop_last, rank=rank,
            world_size=world_size, group=group, mode=mode, dlq_topic=dlq_topic,
            consume_batch=consume_batch, queue_records=queue_records, poll_timeout_s=poll_timeout_s,
            broker_timeout_s=broker_timeout_s, consumer_config=dict(consumer_config or {})))

    def _convert(self, batch: Any) -> Any:
        return collate_samples(batch)

    def __iter__(self) -> Iterator[Any]:
        for batch in self._single_items():
            yield batch[0]

