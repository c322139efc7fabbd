"""Building the next batches on a thread while the caller works on the current one.

:class:`Prefetch` runs an iterator on its own thread and keeps at most ``depth`` of its
items waiting for the caller. The iterator is made with a stop event that its blocking
waits watch (the reader's fetch loop raises :class:`Stopped` once it is set), so
:meth:`Prefetch.close` ends a thread that waits on a live topic with no new data, and
the iterator is closed on its own thread (its consumer too). An exception raised while
making an item reaches the caller as it was raised (same object, same type), at the item
where it happened, after the items made before it.

The thread holds no reference to the :class:`Prefetch` object: once that is collected,
the thread is told to stop and ends by itself.

Nothing here knows about Kafka or torch.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
JOIN_S = 10.0  # the longest close() waits for the thread (a consumer's close included)


class Stopped(Exception):
    """Raised in a prefetch thread by a wait that saw the stop event set: the thread ends."""


class _Handoff:
    """The bounded hand-over between the thread and the caller, and the stop event."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.items: deque[Any] = deque()
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.ended = False
        self.error: BaseException | None = None

    def put(self, item: Any) -> bool:
        """Wait for room, then queue ``item``; False when stopped meanwhile."""
        with self.cond:
            while len(self.items) >= self.depth and not self.stop.is_set():
                self.cond.wait()
            if self.stop.is_set():
                return False
            self.items.append(item)
            self.cond.notify_all()
            return True

    def finish(self, error: BaseException | None) -> None:
        with self.cond:
            self.ended = True
            self.error = error
            self.cond.notify_all()

    def get(self) -> Any:
        """The next item; the thread's error once the items before it are taken;
        StopIteration at the end or once stopped."""
        with self.cond:
            while not self.items:
                if self.error is not None:
                    error, self.error = self.error, None
                    raise error
                if self.ended or self.stop.is_set():
                    raise StopIteration
                self.cond.wait()
            item = self.items.popleft()
            self.cond.notify_all()
            return item

    def halt(self) -> None:
        self.stop.set()
        with self.cond:  # an RLock: safe from a finalizer that runs on a thread holding it
            self.cond.notify_all()


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
        item: T = self._hand.get()
        return item

    @property
    def waiting(self) -> int:
        """Items made and not yet taken."""
        with self._hand.cond:
            return len(self._hand.items)

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
