"""The thread side of kafeed.loader.prefetch: what a prefetch thread and its caller share.

:class:`Shared` holds how to make the iterator, the iterator once made, and the stop event its
waits watch; :class:`Handoff` is the bounded hand-over between one thread and the caller; and
:func:`run` is the thread, which makes items until the iterator ends, fails or is stopped, or
hands the iterator back to the caller unclosed when asked to (:data:`PARKED`).

Nothing here knows about Kafka or torch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kafeed.loader.parent import ParentWatch


class Stopped(Exception):
    """Raised in a prefetch thread by a wait that saw the stop event set: the thread ends."""


def check_running(parent: ParentWatch | None, stop: threading.Event | None, index: int) -> None:
    """Before reader ``index`` fetches or waits: end this process if its trainer is gone
    (``parent``, in a DataLoader worker), raise :class:`Stopped` once ``stop`` is set (on a
    prefetch thread the loader is closing)."""
    if parent is not None:
        parent.check()
    if stop is not None and stop.is_set():
        raise Stopped(f"reader {index} was stopped")


class _End:
    """What the thread sends last: the error it ended with, if any."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


PARKED = object()  # what a thread sends last when it hands the iterator back to the caller


class Shared:
    """What the caller and its threads share: how to make the iterator, the iterator once
    made, the stop event it watches, and the current thread's hand-over."""

    def __init__(self, make: Callable[[threading.Event], Iterator[Any]], depth: int) -> None:
        self.make = make
        self.stop = threading.Event()
        self.items: Iterator[Any] | None = None
        self.closed = False
        self.lock = threading.RLock()  # held while the iterator runs on the caller's thread
        self.hand = Handoff(depth, self.stop)

    def iterator(self) -> Iterator[Any]:
        if self.items is None:
            self.items = self.make(self.stop)
        return self.items

    def close_items(self) -> BaseException | None:
        """Close the iterator (once), on the calling thread; the error its close raised."""
        items, self.items = self.items, None
        self.closed = True
        close = getattr(items, "close", None)
        if close is not None:
            try:
                close()  # a generator's clean-up (closing its consumer) runs on this thread
            except Exception as exc:
                return exc
        return None

    def halt(self) -> None:
        """Stop: the thread if there is one, the iterator if it runs on the caller's thread."""
        self.stop.set()
        self.hand.halt()
        if self.lock.acquire(blocking=False):
            try:
                if self.hand.parked and not self.closed:
                    self.close_items()
            finally:
                self.lock.release()


class Handoff:
    """The bounded hand-over between one thread and the caller.

    Two C-level queues: ``items`` carries the items (then one :class:`_End`, or
    :data:`PARKED`), ``room`` one token per free place. Giving a place back wakes the
    thread with one lock release (a condition notified under its lock wakes it twice, the
    second time for the lock)."""

    def __init__(self, depth: int, stop: threading.Event) -> None:
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.room: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(depth):
            self.room.put(None)
        self.stop = stop
        self.ended = False
        self.park = False  # asked by the caller: hand the iterator back after this item
        self.parked = False  # set by the thread as it does
        self.made = 0  # items queued (counted by the thread)
        self.taken = 0  # items taken (counted by the caller)

    def put(self, item: Any) -> bool:
        """Wait for room, then queue ``item``; False when stopped meanwhile."""
        self.room.get()
        if self.stop.is_set():
            return False
        self.made += 1
        self.items.put(item)
        return True

    def finish(self, error: BaseException | None) -> None:
        self.items.put(_End(error))

    def get(self) -> Any:
        """The next item, its place not yet given back (or :data:`PARKED`); the thread's
        error once the items before it are taken; StopIteration at the end or once stopped."""
        if self.ended:
            raise StopIteration
        item = self.items.get()
        if type(item) is _End:
            self.ended = True
            if item.error is not None:
                raise item.error
            raise StopIteration
        if item is not PARKED:
            self.taken += 1
        return item

    def release(self) -> None:
        self.room.put(None)

    def halt(self) -> None:
        """Stop the thread: wake it if it waits for room, and a caller waiting for an item."""
        self.stop.set()
        self.room.put(None)
        self.items.put(_End(None))


def run(shared: Shared, hand: Handoff) -> None:
    """The thread: make items until the source ends, fails or is stopped, then close it
    here; or, asked to, hand the iterator back to the caller unclosed."""
    error: BaseException | None = None
    try:
        for item in shared.iterator():
            if not hand.put(item):
                break
            if hand.park:
                hand.parked = True
                hand.items.put(PARKED)
                return
    except Stopped:
        pass
    except BaseException as exc:  # whatever it is, the caller's thread raises it unchanged
        error = exc
    closing = shared.close_items()
    hand.finish(error or closing)
