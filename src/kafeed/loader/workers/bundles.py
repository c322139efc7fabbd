"""A worker's batches cross to the main process several at a time, as bundles.

DataLoader's own hand-over costs the main process about 100 us per item on two shared
cores (its queue, unpickling the item, its profiler hooks, waking up for it): with one
batch of 8 x 2,049 tokens per item that was most of the main process's time with workers
(docs/loader.md, "Numbers"). So a worker sends its items a few at a time
(:func:`bundled`), each still with its reader's state as of that batch, and the main
process takes the bundles apart again (:func:`unbundled`) in the order DataLoader gives
single items: one item per worker in turn, from worker 0, a worker skipped once its items
have ended. The items, their order and the state kept for each batch handed out are those
of one batch per item; a bundle only changes how many cross in one hand-over.

How many: a bounded run bundles up to :data:`BATCHES` batches (fewer when a batch is
large: :data:`BYTES` of tokens at most), and a bundle goes once :data:`WAIT_S` has passed
since its first item even if it is not full. A live topic (``end=None``) sends each batch
as soon as it is built: the next one may wait for records that have not been written yet.

Nothing here knows about Kafka.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from kafeed.loader.settings import LoaderSettings

# 16 rather than 8: two workers' main process then spent 27-28 us a batch instead of 34-35,
# and the two read 159-170M tokens/s against 147-152 (four pairs of 100M-token reads).
BATCHES = 16
BYTES = 4 << 20  # int64 tokens of one bundle, at most
WAIT_S = 0.02  # a bundle that is not full goes this long after its first item

T = TypeVar("T")  # an item: (worker, batch, state, delivered), see kafeed.loader.batch_view


def bundle_size(settings: LoaderSettings, batch_size: int, *, packs: bool) -> int:
    """Items per bundle: 1 on a live topic; for token batches (``packs``) as many as fit in
    :data:`BYTES`, at most :data:`BATCHES`."""
    if not settings.bounded:
        return 1
    if not packs:
        return BATCHES
    return max(1, min(BATCHES, BYTES // (batch_size * settings.window * 8)))


def _closing(source: Iterator[Any]) -> None:
    close = getattr(source, "close", None)
    if close is not None:
        close()


def bundled(items: Iterator[T], worker: int, size: int,
            send: Callable[[T], T] | None = None) -> Iterator[tuple[int, list[T], bool]]:
    """In a worker: ``items`` in bundles of up to ``size``, the last one (maybe empty)
    marked as such: ``(worker, items, last)``; ``send`` readies each item for the crossing
    as it is bundled (a token batch into a shared slot). An error raised building an item
    goes after the items before it."""
    pending: list[T] = []
    first = 0.0
    try:
        for item in items:
            if not pending:
                first = time.monotonic()
            pending.append(item if send is None else send(item))
            if len(pending) >= size or time.monotonic() - first >= WAIT_S:
                yield worker, pending, False
                pending = []
        yield worker, pending, True
    except Exception:
        if pending:
            yield worker, pending, False
        raise
    finally:
        _closing(items)


def unbundled(bundles: Iterable[tuple[int, list[T], bool]], workers: int,
              receive: Callable[[T], T] | None = None) -> Iterator[T]:
    """In the main process: the items of the workers' bundles, one per worker in turn
    (worker 0 first), skipping a worker whose items have ended, as DataLoader orders
    single items; ``receive`` turns each back as it is handed on (a shared slot's batch).
    A bundle is taken from ``bundles`` only when the worker whose turn it is has no item
    left, so the state of an item is seen only when it is handed on."""
    source = iter(bundles)
    held: list[deque[T]] = [deque() for _ in range(workers)]
    ended = [False] * workers
    worker = 0
    try:
        while True:
            queue = held[worker]
            while not queue and not ended[worker]:
                got = next(source, None)
                if got is None:  # DataLoader ended: so did every worker
                    ended = [True] * workers
                    break
                sender, items, last = got
                held[sender].extend(items)
                ended[sender] = ended[sender] or last
            if queue:
                yield queue.popleft() if receive is None else receive(queue.popleft())
            elif all(ended) and not any(held):
                return
            worker = (worker + 1) % workers
    finally:
        _closing(source)
