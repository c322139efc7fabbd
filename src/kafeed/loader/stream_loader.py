"""StreamLoader: a DataLoader over a Kafka dataset whose state is exactly what it handed out.

Workers build whole batches (one tensor per batch) and send each with their reader's
state *as of that batch*, several batches per DataLoader item (kafeed.loader.workers.bundles,
taken apart here in the order of one batch per item); token batches travel through
reused shared-memory slots (kafeed.loader.workers.shared_slots). The main process keeps, per
worker, the state attached to the last batch it yielded, and which worker comes next in
DataLoader's round-robin. That is the whole state: batches the workers prefetched but the
caller never saw are not in it, so a resume reads them again. Without workers the main
process is the one reader, and a prefetch thread (kafeed.loader.workers.prefetch) builds its next
batches while the caller steps; they carry their states the same way, and count once
handed out. A caller that comes back for the next batch within :data:`INLINE_BELOW_S` (a
loop that only reads) builds its batches itself instead: the thread's hand-over would
cost it more than it hides.

The loader's Prometheus metrics (kafeed.loader.metrics) are counted here, in the main
process, as each batch is yielded (folded in at a scrape, every 0.5 s, and when an
iteration ends): worker processes' registries are never scraped.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from pydantic import ValidationError

from kafeed.errors import ConfigError, invalid_settings
from kafeed.loader.batch_view import BatchView, Item, entry_data, token_views
from kafeed.loader.dataset import Collate, KafkaDatasetBase, WorkerError, rank_and_world
from kafeed.loader.loader_options import LoaderOptions
from kafeed.loader.metrics import LoaderMetrics, batch_tokens
from kafeed.loader.nodes.record_kinds import KINDS
from kafeed.loader.nodes.stream import Delivered
from kafeed.loader.sources.group_mirror import commit_positions
from kafeed.loader.state.checkpoint import next_epoch, plain_copy
from kafeed.loader.workers.deferred_entry import DeferredEntry
from kafeed.loader.workers.device_feed import DeviceFeed, resolve_device
from kafeed.loader.workers.prefetch import JOIN_S, Prefetch
from kafeed.loader.workers.rank_sync import agree, should_sync
from kafeed.loader.workers.worker_start import prestart, worker_items

__all__ = ["LoaderOptions", "StreamLoader", "entry_data"]

log = logging.getLogger("kafeed")
# Away from the loader for less than this between batches, the caller builds them itself:
# the prefetch thread's hand-over costs 30-50 us of CPU per batch (kafeed.loader.workers.prefetch).
INLINE_BELOW_S = 100e-6


class StreamLoader:
    """Batches from a :class:`KafkaTokenDataset` or :class:`KafkaSampleDataset`.

    Token batches are dicts: ``tokens`` (B, seq_len+1) int64, ``input_ids`` = tokens[:, :-1]
    and ``labels`` = tokens[:, 1:] (views, no copy), plus ``doc_start`` (B, seq_len+1) bool
    with ``return_boundaries``. Sample batches are what ``collate_fn`` makes of a list of
    sample dicts (default :func:`collate_samples`), built in the workers; token batches are
    packed as one array, so a token loader takes no ``collate_fn``. ``prefetch_factor``
    is DataLoader's: bundles each worker prepares ahead (default 2; needs workers), a
    bundle being up to 16 batches in a bounded run and one on a live topic.

    ``state_dict()`` is everything up to and including the last batch yielded, as JSON data;
    ``load_state_dict()`` resumes there. Iterating again after breaking off continues after
    the last batch handed out; once a bounded run was iterated to its end, iterating again
    is a new epoch (``start``/``end`` resolved again, shuffled differently).
    Under torch.distributed with a bounded dataset,
    ranks agree each step (all_reduce MIN of a have-a-batch flag) so that every rank yields
    the same number of batches and none hangs in a collective (``sync_ranks``).

    ``device="cuda"`` hands out batches already on the accelerator: staged in a small pool
    of host buffers (pinned with ``pin_memory=True``), copied with ``non_blocking=True`` on
    a side stream one batch ahead, the caller's stream waiting on the copy's event
    (kafeed.loader.workers.device_feed). ``device="cpu"`` runs the same path without an accelerator.
    The state still counts only the batches handed out.

    With ``num_workers=0`` the next batches are built on a thread while the caller steps,
    up to the dataset's ``prefetch_batches`` (default 2; 0 builds each one when asked), so
    the trainer's wait for a batch is a hand-over. Batches built ahead are not in the
    state. An error raised building a batch is raised here, at that batch, as it was.
    :meth:`close` (or breaking off the iteration, or dropping the loader) stops the thread,
    even while it waits on a live topic with no new data.
    """

    def __init__(
        self, dataset: KafkaDatasetBase, batch_size: int, num_workers: int = 0,
        pin_memory: bool = False, prefetch_factor: int | None = None, *,
        collate_fn: Collate | None = None, sync_ranks: bool | None = None,
        multiprocessing_context: str | None = None, timeout: float = 0.0,
        device: str | torch.device | None = None,
    ) -> None:
        try:
            options = LoaderOptions.model_validate({
                "batch_size": batch_size, "num_workers": num_workers, "pin_memory": pin_memory,
                "prefetch_factor": prefetch_factor, "sync_ranks": sync_ranks,
                "multiprocessing_context": multiprocessing_context, "timeout": timeout,
                "device": None if device is None else str(device)})
        except ValidationError as exc:
            raise invalid_settings(exc, what="StreamLoader arguments") from None
        self.device = None if device is None else resolve_device(device)
        if not isinstance(dataset, KafkaDatasetBase):
            raise ConfigError(f"StreamLoader needs a KafkaTokenDataset or KafkaSampleDataset, "
                              f"not {type(dataset).__name__}.")
        if collate_fn is not None and KINDS[dataset.kind].packs:
            raise ConfigError(
                "A token loader takes no collate_fn: its batches are packed as one array in the "
                "workers, not collated from items.",
                hint="Transform the batch dict in your loop, or iterate the dataset with a DataLoader.")
        self.dataset = dataset
        self.batch_size = options.batch_size
        self.num_workers = options.num_workers
        self.pin_memory = options.pin_memory
        self.prefetch_factor = options.prefetch_factor
        self.collate_fn = collate_fn
        self.sync_ranks = options.sync_ranks
        self.multiprocessing_context = options.multiprocessing_context
        self.timeout = options.timeout
        # Packed by a worker, or the entry (a mixture's deferred) from the main process.
        self._entries: dict[int, bytes | dict[str, Any] | DeferredEntry] = {}
        self._next_worker = 0
        self._loaded: dict[str, Any] | None = None
        self._finished = False  # the last iteration ran a bounded dataset to its end
        self._batches = 0
        self._metrics = LoaderMetrics()
        self._feed = None if self.device is None else DeviceFeed(self.device, pin=self.pin_memory)
        self._prefetch: Prefetch[tuple[int, Any, Any, Delivered]] | None = None
        self._cut = False  # the last iteration was ended by close(), not by the data
        if self.num_workers:
            prestart(self.multiprocessing_context)  # a forkserver's imports overlap the trainer's start

    @property
    def workers(self) -> int:
        return max(self.num_workers, 1)

    def __iter__(self) -> Iterator[Any]:
        """The batches as the caller gets them (token batches with their ``input_ids`` and
        ``labels`` views): :meth:`_handed_out` itself, a generator between the items and the
        caller, or with a device feed :meth:`_fed` around it. Nothing is read before the
        first ``next()``."""
        if self._feed is None:
            return self._handed_out(pairs=False)
        return self._fed(self._feed)

    @property
    def prefetched(self) -> int:
        """Batches built ahead on the prefetch thread and not yet handed out."""
        prefetch = self._prefetch
        return 0 if prefetch is None else prefetch.waiting

    def close(self) -> None:
        """Stop the prefetch thread (its reader's consumer closed on it) and wait for it to
        end; an iteration in progress then ends. Iterating again continues after the last
        batch handed out."""
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None and not prefetch.close():
            log.warning("kafeed loader: the prefetch thread did not end within %.0f s", JOIN_S)

    def _fed(self, feed: DeviceFeed) -> Iterator[Any]:
        """The batches through the device feed, one copy ahead; each is marked as handed out
        just before the caller gets it, and given its token views after the copy."""
        tokens_kind = KINDS[self.dataset.settings.kind].packs
        for batch in feed.ahead(self._handed_out(pairs=True)):
            yield token_views(batch) if tokens_kind else batch
        # Under sync_ranks an epoch ends for every rank when the first one runs out.
        self._finished = self.dataset.settings.bounded and not self._cut

    def _handed_out(self, pairs: bool) -> Iterator[Any]:
        """Each batch from the workers, marked as handed out (state, round-robin, metrics:
        :meth:`_mark`) as the caller gets it; with ``pairs``, ``(batch, mark)`` for the device
        feed, which calls ``mark()`` when it hands the batch out. Without a device feed a
        token batch comes with its views already made (on the prefetch thread when there is
        one)."""
        self._cut = False
        rank, _ = rank_and_world(self.dataset.settings)
        if self._entries or self._finished:
            # Iterating again continues after the last batch handed out, or starts a new epoch.
            state = self.state_dict()
            self._loaded = self.dataset.check_state(next_epoch(state) if self._finished else state)
        self._finished = False
        if self._loaded is not None:
            self.dataset.load_state_dict(self._loaded)
        next_worker = 0
        if self._loaded is not None and self._loaded["num_readers"] == self._count():
            next_worker = int(self._loaded["next_worker"].get(str(rank), 0))
        self._next_worker = next_worker
        self._entries = {}
        tokens_kind = KINDS[self.dataset.settings.kind].packs
        items, prefetch = self._items(next_worker)
        sync = should_sync(self.sync_ranks, self.dataset.settings.bounded)
        stopped = False
        metrics = self._metrics
        mark = self._mark
        try:
            for worker, batch, state, delivered in items:
                if isinstance(batch, WorkerError):
                    log.debug("kafeed loader: worker %d failed:\n%s", batch.worker, batch.trace)
                    raise batch.error()
                if batch is None:
                    if state:
                        self._entries.setdefault(worker, state)
                        metrics.positions(delivered)
                    if prefetch is not None:
                        prefetch.release()
                    continue
                if sync and not agree(True):
                    stopped = True
                    break
                tokens = batch_tokens(batch) if tokens_kind else 0
                if pairs:
                    yield batch, functools.partial(mark, worker, state, delivered, tokens, prefetch)
                    continue
                mark(worker, state, delivered, tokens, prefetch)
                yield batch
            cut = prefetch is not None and prefetch.stopped  # close() ended it, not the data
        finally:
            # An iterator left alive in a script's globals is finalized here after the exit's
            # clean-up (kafeed.loader.workers.prefetch closed its thread then): nobody scrapes the
            # metrics any more, and a fold's imports would fail.
            if not sys.is_finalizing():
                metrics.fold()  # a loader dropped after its loop is never collected again
            if prefetch is not None:
                # Breaking off, an error, the end or close(): the thread and its consumer end here.
                prefetch.close()
                if self._prefetch is prefetch:
                    self._prefetch = None
        self._cut = cut
        if sync and not stopped and not cut:
            agree(False)
        if not pairs:
            # Under sync_ranks an epoch ends for every rank when the first one runs out.
            self._finished = self.dataset.settings.bounded and not cut

    def _items(self, next_worker: int) -> tuple[Iterable[Item], Prefetch[Item] | None]:
        """The items of this iteration: from the prefetch thread (no workers, with a
        prefetch depth), from the workers, or built when asked; and the prefetch, if any."""
        pin = self.pin_memory and self._feed is None
        depth = self.dataset.settings.prefetch_batches if self.num_workers == 0 else 0
        tokens_kind = KINDS[self.dataset.settings.kind].packs
        views = tokens_kind and self._feed is None  # the feed copies the tokens, then views them
        view = BatchView(self.dataset, self.batch_size, next_worker, self.collate_fn)
        if depth:
            self.close()  # an earlier iteration's thread, if it was left running
            # The views are made on the thread, as the dataset builds each batch: slicing a
            # tensor releases the GIL, and in the caller's hand-over, after the place is given
            # back, the woken thread would take it and build its next batch while the caller
            # waits. Each place is given back once the batch is marked (_mark).
            prefetch = self._prefetch = Prefetch(
                lambda stop: view.batches(stop, pin=pin and torch.cuda.is_available(), views=views),
                depth, inline_below_s=INLINE_BELOW_S, hold=True)
            return prefetch, prefetch
        if not self.num_workers:
            # Straight from the view: a DataLoader without workers would only add its profiler
            # hooks and fetcher, 1.5 ns of CPU per token (py-spy, batches of 8 x 2,049).
            return view.batches(pin=pin and torch.cuda.is_available(), views=views), None
        loader = worker_items(view, workers=self.num_workers, depth=self.prefetch_factor or 2,
                              slots=tokens_kind, pin=pin, views=views, timeout=self.timeout,
                              context=self.multiprocessing_context)
        return loader, None

    def _mark(self, worker: int, state: bytes | dict[str, Any] | DeferredEntry, delivered: Delivered,
              tokens: int, prefetch: Prefetch[Any] | None) -> None:
        """Record a batch of ``worker`` as handed out: its state, the round-robin, the
        metrics; then give its place back to the prefetch thread."""
        self._entries[worker] = state
        self._next_worker = (worker + 1) % self.workers
        self._batches += 1
        self._metrics.batch(delivered, tokens)
        if prefetch is not None:
            prefetch.release()  # last: the thread building the next batch wants the GIL

    def _count(self) -> int:
        _, world = rank_and_world(self.dataset.settings)
        return world * self.workers

    # -- state ------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This rank's readers as of the last batch yielded (merge ranks with merge_states)."""
        if not self._entries:
            if self._loaded is not None:
                loaded: dict[str, Any] = json.loads(json.dumps(self._loaded))
                return loaded
            return self.dataset.empty_state()
        rank, _ = rank_and_world(self.dataset.settings)
        state = self.dataset.empty_state()
        state["num_readers"] = self._count()
        state["readers"] = {
            str(rank * self.workers + w): entry_data(entry)
            for w, entry in sorted(self._entries.items())
        }
        state["next_worker"] = {str(rank): self._next_worker}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state`` at the next iteration; a malformed state or one taken with
        other settings raises ResumeMismatch here, one that does not fit the topic when
        iteration starts (before anything is read)."""
        self._loaded = self.dataset.check_state(plain_copy(state))
        self._entries = {}
        self._finished = False

    def commit_offsets(self, group: str | None = None) -> dict[str, int]:
        """Mirror the state's positions to consumer group ``group`` (default: the dataset's)
        for lag monitoring; call it after a checkpoint is saved. Returns what was committed."""
        return commit_positions(self.dataset.settings, self.state_dict(), group)
