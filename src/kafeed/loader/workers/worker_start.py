"""How StreamLoader's worker processes start (the caller's choice, else forked or from a forkserver),
and how their batches come back (in bundles, token batches through shared slots)."""

from __future__ import annotations

import functools
import gc
import logging
import multiprocessing
import os
import pickle
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils.data import DataLoader

from kafeed.loader.batch_view import BatchView, Item, from_slot
from kafeed.loader.workers.bundles import bundle_size, unbundled
from kafeed.loader.workers.forkserver_guard import in_forkserver
from kafeed.loader.workers.main_guard import check_main_guard, main_is_guarded
from kafeed.loader.workers.parent import watch_worker
from kafeed.loader.workers.shared_slots import SharedSlots

log = logging.getLogger("kafeed")


def _identity(item: Any) -> Any:
    return item


def worker_items(view: BatchView, *, workers: int, depth: int, slots: bool, pin: bool, views: bool,
                 timeout: float, context: str | None) -> Iterable[Item]:
    """The items of ``workers`` DataLoader workers over ``view``, each ``depth`` bundles
    ahead (kafeed.loader.workers.bundles), in the order of one item per DataLoader item; with
    ``slots`` (token batches) they come back through reused shared slots
    (kafeed.loader.workers.shared_slots), given their token views there with ``views``.
    ``context``: the caller's ``multiprocessing_context``."""
    settings = view.dataset.settings
    view.bundle = bundle_size(settings, view.batch_size, packs=slots)
    shared = None
    if slots:
        # Out at once per worker: ``depth`` bundles, the rest of the one being taken apart
        # (its batch with the caller is among the pool's spares), and one more: a worker
        # whose bundles went out short (slow, WAIT_S) runs dry first, and the next bundle in
        # DataLoader's order, another worker's, is taken in while it waits.
        ahead = (depth + 2) * view.bundle - 1
        shared = SharedSlots(workers=workers, depth=ahead, batch_size=view.batch_size,
                             window=settings.window, boundaries=settings.return_boundaries)
    # Whether the view pickles is asked without the slots: pickle would copy them.
    start = worker_context(context, view)
    view.slots = shared
    bundles = DataLoader(
        view, batch_size=None, num_workers=workers, collate_fn=_identity, pin_memory=pin, timeout=timeout,
        prefetch_factor=depth, multiprocessing_context=start,
        worker_init_fn=functools.partial(start_worker, view.origin))
    if shared is None:
        return unbundled(bundles, workers)
    return unbundled(bundles, workers,
                     receive=functools.partial(from_slot, shared, pin and torch.cuda.is_available(), views))


def start_worker(origin: int, worker_id: int) -> None:
    """DataLoader's ``worker_init_fn``: the watch on the trainer first (kafeed.loader.workers.parent),
    then what the worker started with (torch and kafeed, imported by the forkserver or the
    trainer it was forked from) frozen out of the cyclic collector's passes.

    Unfrozen, each full pass of a worker walked those 200,000 objects, writing to the pages
    it shares with its parent, which the kernel then copies: 91 ms and 12,500 pages a pass,
    measured in a child forked after importing kafeed.loader. Frozen, two workers read 100M
    tokens 1.19x as fast at 0.84x the CPU per token (docs/loader.md, "Numbers").
    The trainer's own objects are its to freeze or not (kafeed.train.runner does)."""
    watch_worker(origin, worker_id)
    gc.freeze()


def worker_context(choice: str | None, view: Any) -> Any:
    """The context workers start from (see :func:`start_context`), after checking that
    the main script will not start them again (kafeed.loader.workers.main_guard)."""
    context = start_context(choice, view)
    log.debug("kafeed loader: workers start by %s", getattr(context, "_name", context) or "fork")
    if context is None:
        method = multiprocessing.get_start_method(allow_none=True) or "fork"
    else:
        method = context if isinstance(context, str) else context.get_start_method()
    check_main_guard(method)
    return context


def start_context(choice: str | None, view: Any) -> Any:
    """The caller's ``multiprocessing_context``, else ``fork`` where that is safe, else a
    forkserver's.

    A fork copies the trainer as it is, Kafka clients' threads and held locks included;
    a worker forked while a librdkafka thread held a lock can hang or crash in its first
    Kafka call (a pytest process full of clients once lost a worker to a segfault). So
    workers fork only from a trainer that runs no librdkafka thread at that moment
    (:func:`kafka_threads`, read from the kernel, not from what kafeed believes it opened):
    then a fork is as clean as the forkserver's own, and the workers start in tens of
    milliseconds with what the trainer imported, where a forkserver first imports torch and
    kafeed again (2-3 s here). Otherwise they start from a forkserver, which never opened a
    client; :func:`prestart` starts it when the loader is built, so that its imports overlap
    the trainer's own start. A batch view that cannot be pickled (a lambda ``collate_fn``)
    can only be forked. A forkserver, chosen or not, preloads kafeed.loader.workers.forkserver_guard:
    it ends with the trainer.
    """
    if choice is not None and choice != "forkserver":
        return choice
    if choice is None:
        if "forkserver" not in multiprocessing.get_all_start_methods():
            return None
        if kafka_threads() == 0:
            return "fork"
        try:
            pickle.dumps(view)
        except Exception:  # whatever pickling raises, fork is the fallback
            log.debug("kafeed loader: the batch view does not pickle; workers are forked")
            return None
    return _forkserver()


def _forkserver() -> Any:
    context = multiprocessing.get_context("forkserver")
    # The guard first: the forkserver is bound to the trainer before the long import.
    context.set_forkserver_preload(["kafeed.loader.workers.forkserver_guard", "kafeed.loader.stream_loader"])
    return context


def kafka_threads() -> int | None:
    """How many librdkafka threads this process runs now (the kernel's names for them start
    with ``rdk:``), or None where /proc cannot say (not Linux)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    count = 0
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm", "rb") as comm:
                count += comm.read().startswith(b"rdk:")
        except OSError:
            continue  # the thread ended meanwhile
    return count


def prestart(choice: str | None) -> None:
    """Start the forkserver now (from the thread that builds the loader) when the workers
    would start from one as things stand, so that its imports run while the trainer builds
    its model, not after the first ``next()``. Not for a main script without the
    ``__main__`` guard: the forkserver imports it (check_main_guard refuses it later, with
    what to do)."""
    if choice not in (None, "forkserver") or "forkserver" not in multiprocessing.get_all_start_methods():
        return
    if choice is None and kafka_threads() == 0:
        return
    if not main_is_guarded() or multiprocessing.parent_process() is not None or in_forkserver():
        return  # a loader built again while a forkserver or a worker imports the main script
    _forkserver()
    from multiprocessing import forkserver

    forkserver.ensure_running()
