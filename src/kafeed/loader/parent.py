"""DataLoader workers end when the process that started them dies, however it dies.

Three mechanisms, armed by :func:`watch_parent` when a reader opens inside a worker:

- Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so the kernel kills the worker the moment its
  parent goes. SIGKILL, not SIGTERM: a trainer's SIGTERM handler is inherited by forked
  workers and would turn the signal into a flag nobody reads. The kernel sends it when the
  *thread* that forked the worker exits; DataLoader forks workers from the thread that
  iterates it, normally the main thread, whose end is the process's end. A trainer that
  iterates the loader from another thread and lets that thread end while the process lives
  on loses its workers then, which is what it should expect anyway.
- With a forkserver (the default) the kernel's signal follows the forkserver, not the
  trainer, so a thread in the worker checks the trainer twice a second.
- Everywhere: :meth:`ParentWatch.check` in the reader's fetch loop (once per ``consume``
  call, at most ``poll_timeout_s`` apart) sees the parent gone (``os.getppid()`` changed:
  the worker was re-parented; or the pid that started the DataLoader, when known, no
  longer exists) and ends the process at once with ``os._exit``. Nothing is left to
  report to, and a normal exit could wait forever on a queue feeder thread writing to the
  dead parent.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from types import TracebackType

log = logging.getLogger("kafeed")

PR_SET_PDEATHSIG = 1
EXIT_PARENT_GONE = 70  # what a worker exits with when it notices its parent died


def _set_pdeathsig(sig: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
            log.debug("kafeed loader: prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
            return False
    except (OSError, AttributeError) as exc:
        log.debug("kafeed loader: no prctl (%s); relying on the parent check", exc)
        return False
    return True


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ParentWatch:
    """Ends this process when its parent (``parent``: the pid that forked it) or ``origin``
    (the process that iterates the DataLoader, when known) is gone."""

    def __init__(self, parent: int, origin: int | None = None) -> None:
        self.parent = parent
        self.origin = origin
        self.armed = _set_pdeathsig(signal.SIGKILL)
        self.check()  # the parent may have died before the signal was armed

    def gone(self) -> bool:
        return os.getppid() != self.parent or (self.origin is not None and not _exists(self.origin))

    def check(self) -> None:
        if self.gone():
            os._exit(EXIT_PARENT_GONE)


def watch_parent(origin: int | None = None) -> ParentWatch:
    """Arm them in this worker process. ``origin``: the pid of the process that
    started the DataLoader (with ``forkserver`` that is not the direct parent)."""
    watch = ParentWatch(os.getppid(), origin)
    _quiet_closed_connections()
    if origin is not None and origin != watch.parent:
        # The kernel's signal follows the forkserver, which lives as long as any worker
        # holds its liveness pipe, so it never comes; a worker blocked on a full queue
        # never reaches check(). A thread that looks twice a second does.
        threading.Thread(target=_watch_origin, args=(watch,), name="kafeed-parent-watch",
                         daemon=True).start()
    return watch


def _quiet_closed_connections() -> None:
    """A worker hands batches over through multiprocessing's fd-sharing thread, which
    reports its errors with ``sys.excepthook``; when the trainer exits (a stop signal)
    mid-handover that thread meets a closed connection and would print a traceback under
    the trainer's own exit message. Such errors are logged at debug; others print as before."""
    previous = sys.excepthook
    if getattr(previous, "quiets_closed_connections", False):
        return  # installed when an earlier epoch's reader opened in this worker

    def hook(kind: type[BaseException], value: BaseException, trace: TracebackType | None) -> None:
        if isinstance(value, ConnectionError):
            log.debug("kafeed loader: worker: %s (the trainer has gone)", value)
            return
        previous(kind, value, trace)

    hook.quiets_closed_connections = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def _watch_origin(watch: ParentWatch) -> None:
    while not watch.gone():
        time.sleep(0.5)
    os._exit(EXIT_PARENT_GONE)
