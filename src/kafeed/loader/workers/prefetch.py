"""Building the next batches on a thread while the caller works on the current one.

:class:`Prefetch` runs an iterator on its own thread and keeps at most ``depth`` of its
items waiting for the caller. The iterator is made with a stop event that its blocking
waits watch (the reader's fetch loop raises :class:`Stopped` once it is set), so
:meth:`Prefetch.close` ends a thread that waits on a live topic with no new data, and
the iterator is closed on its own thread (its consumer too). An exception raised while
making an item reaches the caller as it was raised (same object, same type), at the item
where it happened, after the items made before it. A caller that still has work to do
for an item (StreamLoader: its state and metrics) takes it with :meth:`Prefetch.take`, or
iterates a ``Prefetch(..., hold=True)``, and gives its place back with
:meth:`Prefetch.release` afterwards: the woken thread wants the GIL at once, and would
otherwise slow that work down.

The thread only pays when the caller is away between items (a training step) long enough
for the next item to be built meanwhile. Each hand-over costs tens of microseconds of CPU
(two threads waking each other), which a caller that comes straight back for the next item
(a loop that only reads) pays on every item for nothing. With ``inline_below_s``, once the
caller has come back within that long for :data:`PARK_AFTER` items in a row, the thread
hands the iterator over and ends: the caller makes each item itself when it asks, on its
own thread, until it has been away that long for :data:`THREAD_AFTER` items in a row,
when a new thread takes the iterator on from where it was. The items and their order are
the same either way.

The thread holds no reference to the :class:`Prefetch` object: once that is collected,
the thread is told to stop and ends by itself.

Nothing here knows about Kafka or torch.

The thread side: :class:`Shared` holds how to make the iterator, the iterator once made, and
the stop event its waits watch; :class:`Handoff` is the bounded hand-over between one thread
and the caller; and :func:`run` is the thread, which makes items until the iterator ends,
fails or is stopped, or hands the iterator back to the caller unclosed when asked to
(:data:`PARKED`).
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from kafeed.loader.workers.parent import ParentWatch

__all__ = ["JOIN_S", "PARK_AFTER", "THREAD_AFTER", "Prefetch", "Stopped"]

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


T = TypeVar("T")
JOIN_S = 10.0  # the longest close() waits for the thread (a consumer's close included)
PARK_AFTER = 8  # items in a row with the caller back within inline_below_s: the thread ends
THREAD_AFTER = 2  # items in a row with the caller away longer: a thread starts again


def _close_live() -> None:
    """At interpreter exit, while threads still run: stop every prefetch thread and wait for
    it to close its iterator (its consumer too). Finalizing later, a thread can no longer run,
    and a wait for it would hold the exit."""
    for prefetch in list(_live):
        prefetch.close()


_live: weakref.WeakSet[Prefetch[Any]] = weakref.WeakSet()
atexit.register(_close_live)


class Prefetch(Generic[T]):
    """The items of ``make(stop)``, made on a thread at most ``depth`` ahead of the caller;
    with ``inline_below_s``, made by the caller itself while it comes straight back for
    them (see the module docstring). Iterated, each item's place is given back as it is
    taken, or with ``hold`` kept until the caller's :meth:`release`."""

    def __init__(self, make: Callable[[threading.Event], Iterator[T]], depth: int, *,
                 name: str = "kafeed-prefetch", inline_below_s: float = 0.0, hold: bool = False) -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, not {depth}")
        self._shared = Shared(make, depth)
        self._depth = depth
        self._name = name
        self._inline_below_s = inline_below_s
        self._hold = hold
        self._inline = False  # the caller makes the items (the thread handed the iterator back)
        self._released = 0.0  # when the caller last gave a place back (perf_counter)
        self._run_of = 0  # items in a row on the side of the threshold that would switch
        # Before the thread starts: a signal handled while start() waits for it (a trainer's
        # stop raises out of that wait) drops this object half made, and the thread must end.
        weakref.finalize(self, self._shared.halt)
        _live.add(self)
        self._start()

    def _start(self) -> None:
        # Kept before it starts, so that close() waits for the thread even when a signal
        # is raised out of start().
        self._thread = threading.Thread(target=run, args=(self._shared, self._shared.hand),
                                        name=self._name, daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        item = self.take()
        if not self._hold:
            self.release()
        return item

    @property
    def inline(self) -> bool:
        """True while the caller makes the items itself (no thread)."""
        return self._inline

    def take(self) -> T:
        """The next item, keeping its place until :meth:`release`: the thread waits to build
        another until then. Giving the place back wakes the thread, which then wants the
        GIL; a caller with more to do for this item (state, metrics) releases after it, so
        that work is not slowed by the thread's."""
        if self._inline_below_s and self._released:
            self._watch(time.perf_counter() - self._released)
        if self._inline:
            return self._make()
        hand = self._shared.hand
        item = hand.get()
        if item is PARKED:
            self._thread.join()
            self._inline = True
            return self._make()
        result: T = item
        return result

    def _watch(self, away: float) -> None:
        """Count the items in a row that the caller came back for within (thread) or after
        (inline) ``inline_below_s``, and switch once there are enough."""
        if self._inline == (away < self._inline_below_s):
            self._run_of = 0
            return
        self._run_of += 1
        if not self._inline and self._run_of >= PARK_AFTER:
            self._shared.hand.park = True
            self._run_of = 0
        elif self._inline and self._run_of >= THREAD_AFTER and not self._shared.stop.is_set():
            with self._shared.lock:
                self._shared.hand = Handoff(self._depth, self._shared.stop)
                self._inline = False
                self._run_of = 0
                self._start()

    def _make(self) -> T:
        """The next item, made on the caller's thread."""
        shared = self._shared
        with shared.lock:
            if shared.stop.is_set() or shared.closed:
                shared.close_items()
                raise StopIteration
            try:
                item: T = next(shared.iterator())
            except StopIteration:
                self._raise(shared.close_items())
                raise
            except Stopped:
                self._raise(shared.close_items())
                raise StopIteration from None
            except BaseException:
                shared.close_items()
                raise
        return item

    @staticmethod
    def _raise(error: BaseException | None) -> None:
        if error is not None:
            raise error

    def release(self) -> None:
        """Give the place of an item taken with :meth:`take` back to the thread."""
        if not self._inline:
            self._shared.hand.release()
        if self._inline_below_s:
            self._released = time.perf_counter()

    @property
    def waiting(self) -> int:
        """Items made and not yet taken."""
        hand = self._shared.hand
        return 0 if self._inline else hand.made - hand.taken

    @property
    def stopped(self) -> bool:
        """True once :meth:`close` was called (the items may not have run out)."""
        return self._shared.stop.is_set()

    def close(self, timeout: float = JOIN_S) -> bool:
        """Stop the thread and wait for it (not from the thread itself), or close the
        iterator that the caller runs; True when it ended."""
        shared = self._shared
        shared.halt()
        if self._thread is not threading.current_thread():
            try:
                self._thread.join(timeout)
            except RuntimeError:  # never started: a signal came before it did
                pass
        if self._thread.is_alive():
            return False
        if not shared.lock.acquire(timeout=timeout):
            return False  # the caller's thread is inside the iterator, and it did not stop
        try:
            if not shared.closed and shared.items is not None:
                shared.close_items()
        finally:
            shared.lock.release()
        return True
