"""Building the next batches on a thread while the caller works on the current one.

:class:`Prefetch` runs an iterator on its own thread and keeps at most ``depth`` of its
items waiting for the caller. The iterator is made with a stop event that its blocking
waits watch (the reader's fetch loop raises :class:`Stopped` once it is set), so
:meth:`Prefetch.close` ends a thread that waits on a live topic with no new data, and
the iterator is closed on its own thread (its consumer too). An exception raised while
making an item reaches the caller as it was raised (same object, same type), at the item
where it happened, after the items made before it. A caller that still has work to do
for an item (StreamLoader: its state and metrics) takes it with :meth:`Prefetch.take` and
gives its place back with :meth:`Prefetch.release` afterwards: the woken thread wants the
GIL at once, and would otherwise slow that work down.

The thread holds no reference to the :class:`Prefetch` object: once that is collected,
the thread is told to stop and ends by itself.

Nothing here knows about Kafka or torch.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
JOIN_S = 10.0  # the longest close() waits for the thread (a consumer's close included)


class Stopped(Exception):
    """Raised in a prefetch thread by a wait that saw the stop event set: the thread ends."""


class _End:
    """What the thread sends last: the error it ended with, if any."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class _Handoff:
    """The bounded hand-over between the thread and the caller, and the stop event.

    Two C-level queues: ``items`` carries the items (then one :class:`_End`), ``room``
    one token per free place. Giving a place back wakes the thread with one lock release
    (a condition notified under its lock wakes it twice, the second time for the lock)."""

    def __init__(self, depth: int) -> None:
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.room: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(depth):
            self.room.put(None)
        self.stop = threading.Event()
        self.ended = False
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
        """The next item, its place not yet given back; the thread's error once the items
        before it are taken; StopIteration at the end or once stopped."""
        if self.ended:
            raise StopIteration
        item = self.items.get()
        if type(item) is _End:
            self.ended = True
            if item.error is not None:
                raise item.error
            raise StopIteration
        self.taken += 1
        return item

    def release(self) -> None:
        self.room.put(None)

    def halt(self) -> None:
        """Stop the thread: wake it if it waits for room, and a caller waiting for an item."""
        self.stop.set()
        self.room.put(None)
        self.items.put(_End(None))


def _run(make: Callable[[threading.Event], Iterator[Any]], hand: _Handoff) -> None:
    """The thread: make items until the source ends, fails or is stopped, then close it here."""
    error: BaseException | None = None
    items: Iterator[Any] | None = None
    try:
        items = make(hand.stop)
        for item in items:
            if not hand.put(item):
                break
    except Stopped:
        pass
    except BaseException as exc:  # whatever it is, the caller's thread raises it unchanged
        error = exc
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            try:
                close()  # a generator's clean-up (closing its consumer) runs on this thread
            except Exception as exc:
                error = error or exc
        hand.finish(error)


class Prefetch(Generic[T]):
    """The items of ``make(stop)``, made on a thread at most ``depth`` ahead of the caller."""

    def __init__(self, make: Callable[[threading.Event], Iterator[T]], depth: int, *,
                 name: str = "kafeed-prefetch") -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        self._hand = _Handoff(depth)
        self._thread = threading.Thread(target=_run, args=(make, self._hand), name=name, daemon=True)
        weakref.finalize(self, self._hand.halt)
        self._thread.start()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        item = self.take()
        self.release()
        return item

    def take(self) -> T:
        """The next item, keeping its place until :meth:`release`: the thread waits to build
        another until then. Giving the place back wakes the thread, which then wants the
        GIL; a caller with more to do for this item (state, metrics) releases after it, so
        that work is not slowed by the thread's."""
        item: T = self._hand.get()
        return item

    def release(self) -> None:
        """Give the place of an item taken with :meth:`take` back to the thread."""
        self._hand.release()

    @property
    def waiting(self) -> int:
        """Items made and not yet taken."""
        return self._hand.made - self._hand.taken

    @property
    def stopped(self) -> bool:
        """True once :meth:`close` was called (the items may not have run out)."""
        return self._hand.stop.is_set()

    def close(self, timeout: float = JOIN_S) -> bool:
        """Stop the thread and wait for it (not from the thread itself); True when it ended."""
        self._hand.halt()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return not self._thread.is_alive()
