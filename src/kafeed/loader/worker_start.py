"""How StreamLoader's worker processes start: the caller's choice, else from a forkserver."""

from __future__ import annotations

import logging
import multiprocessing
import pickle
from typing import Any

from kafeed.loader.main_guard import check_main_guard

log = logging.getLogger("kafeed")


def worker_context(choice: str | None, view: Any) -> Any:
    """The context workers start from (see :func:`start_context`), after checking that
    the main script will not start them again (kafeed.loader.main_guard)."""
    context = start_context(choice, view)
    if context is None:
        method = multiprocessing.get_start_method(allow_none=True) or "fork"
    else:
        method = context if isinstance(context, str) else context.get_start_method()
    check_main_guard(method)
    return context


def start_context(choice: str | None, view: Any) -> Any:
    """The caller's ``multiprocessing_context``, else a forkserver's.

    A fork copies the trainer as it is, Kafka clients' threads and held locks included;
    a worker forked while a librdkafka or OpenMP thread held a lock can hang or crash in
    its first Kafka call. The forkserver forks from a process that never opened one
    (it imports the loader once, then each worker starts in milliseconds). A batch view
    that cannot be pickled (a lambda ``collate_fn``) can only be forked. A forkserver,
    chosen or not, preloads kafeed.loader.forkserver_guard: it ends with the trainer.
    """
    if choice is not None and choice != "forkserver":
        return choice
    if choice is None:
        if "forkserver" not in multiprocessing.get_all_start_methods():
            return None
        try:
            pickle.dumps(view)
        except Exception:  # whatever pickling raises, fork is the fallback
            log.debug("kafeed loader: the batch view does not pickle; workers are forked")
            return None
    context = multiprocessing.get_context("forkserver")
    # The guard first: the forkserver is bound to the trainer before the long import.
    context.set_forkserver_preload(["kafeed.loader.forkserver_guard", "kafeed.loader.stream_loader"])
    return context
