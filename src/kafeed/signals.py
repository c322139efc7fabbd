"""SIGINT/SIGTERM as a request to stop, installed before any heavy import or network call.

Long commands call :func:`install` first thing, so a signal that arrives while torch or
the Kafka client is still importing is remembered instead of killing the process. Long
loops check :attr:`StopRequest.event` between batches (or pass it on as a
``threading.Event``), finish or abort what is open, and return; the CLI then exits with
:attr:`StopRequest.exit_code` (130 for SIGINT, 143 for SIGTERM).

A loop that blocks where an event is never checked (waiting for the next batch) can
register a callback with :meth:`StopRequest.on_signal`; it runs in the main thread inside
the signal handler and may raise to leave the wait.

A child kafeed starts asks for a signal when its parent dies (:func:`die_with_parent`), so
that it never outlives it (ARCHITECTURE.md, "Process lifetime").
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def die_with_parent(sig: int) -> bool:
    """Ask the kernel (Linux) to send ``sig`` to this process when the thread that started
    it ends; False where it cannot (another system, no prctl)."""
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) == 0


def ends_with_this_process(sig: int) -> Callable[[], None]:
    """A ``subprocess.Popen`` ``preexec_fn``: the child gets ``sig`` when this process (the
    calling thread) dies, and exits at once if it died before the child could ask. libc's
    prctl is looked up here, in the parent: a lookup in the forked child could wait on a
    loader lock another thread held at fork time."""
    parent = os.getpid()
    _prctl()

    def arm() -> None:
        die_with_parent(sig)
        if os.getppid() != parent:
            os._exit(1)

    return arm


class StopRequest:
    """Which stop signal arrived first (if any), as a flag and a ``threading.Event``."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self._callbacks: list[Callable[[int], None]] = []
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal number (130 SIGINT, 143 SIGTERM); 0 when none arrived."""
        return 128 + self.signum if self.signum is not None else 0

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def on_signal(self, callback: Callable[[int], None]) -> Callable[[], None]:
        """Call ``callback(signum)`` from the handler; returns a function that unregisters it."""
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
        self.event.set()
        for callback in list(self._callbacks):
            callback(signum)

    def install(self) -> StopRequest:
        """Route SIGINT/SIGTERM here (main thread only; a no-op elsewhere and when installed)."""
        if self._previous or threading.current_thread() is not threading.main_thread():
            return self
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        """Give the signals back to whoever had them before :meth:`install`."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()

    def reset(self) -> None:
        self.signum = None
        self.event.clear()


_PROCESS = StopRequest()


def stop_request() -> StopRequest:
    """The process's stop request (installed or not)."""
    return _PROCESS


def install() -> StopRequest:
    """Install the process's stop handler and return it; safe to call more than once."""
    return _PROCESS.install()
