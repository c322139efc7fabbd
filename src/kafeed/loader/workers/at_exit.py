"""Streams still open when the interpreter exits are closed before it finalizes.

A dataset iterator left alive (a module global at the end of a script) is finalized late in
interpreter shutdown; closing its consumer then starts the close thread of
kafeed.kafka.close_consumer, and a thread started at that point never runs, so the process
would wait for it for ever. An ``atexit`` hook runs while threads still do: it closes every
stream opened on the main thread, or on a thread that has ended, and not yet closed.
A stream owned by a live thread (StreamLoader's prefetch thread) is that thread's to close.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from typing import Protocol


class Closable(Protocol):
    def close(self) -> None: ...


_open: weakref.WeakKeyDictionary[Closable, threading.Thread] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_registered = False


def close_at_exit(stream: Closable) -> None:
    """Close ``stream`` at interpreter exit if it is still open then (closing twice is a no-op)."""
    global _registered
    with _lock:
        if not _registered:
            atexit.register(_close_open)
            _registered = True
        _open[stream] = threading.current_thread()


def _close_open() -> None:
    with _lock:
        owned = list(_open.items())
        _open.clear()
    for stream, thread in owned:
        if thread is threading.main_thread() or not thread.is_alive():
            stream.close()
