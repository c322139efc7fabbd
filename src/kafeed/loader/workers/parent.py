"""Loader processes end when the process that started them dies, however it dies.

A DataLoader worker arms :func:`watch_parent` first thing (DataLoader's ``worker_init_fn``,
set by StreamLoader), before it can block on its index queue:

- Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, so the kernel kills the worker the moment its
  parent goes. SIGKILL, not SIGTERM: a trainer's SIGTERM handler is inherited by forked
  workers and would turn the signal into a flag nobody reads. The kernel sends it when the
  *thread* that forked the worker exits; DataLoader forks workers from the thread that
  iterates it, normally the main thread, whose end is the process's end. A trainer that
  iterates the loader from another thread and lets that thread end while the process lives
  on loses its workers then, which is what it should expect anyway.
- With a forkserver (the default) a worker's parent is the forkserver, and the forkserver
  lives as long as any worker holds its liveness pipe (every worker does), so neither would
  ever see the other go. The forkserver therefore imports :mod:`kafeed.loader.workers.forkserver_guard`
  as a preload, which arms the same signal in it: the trainer's death ends the forkserver,
  whose death ends the workers. multiprocessing's resource tracker then reads EOF from its
  pipe, cleans up what the trainer left, and ends too.
- Everywhere: a thread in the worker looks at the trainer (``origin``) twice a second and
  ends the process when it is gone: no longer there, a zombie, or its pid reused by a
  process that started later. It covers a forkserver started without the guard, systems
  without ``prctl``, and a trainer that died before the signal was armed.
- :meth:`ParentWatch.check`, in the reader's fetch loop, ends the worker as soon as the
  thread (or ``os.getppid()``) says so, without waiting for the next look.

The worker ends with ``os._exit``: nothing is left to report to, and a normal exit could
wait forever on a queue feeder thread writing to the dead parent.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from types import TracebackType

from kafeed.signals import die_with_parent

log = logging.getLogger("kafeed")

EXIT_PARENT_GONE = 70  # what a worker exits with when it notices its parent died
LOOK_EVERY_S = 0.5


def started(pid: int) -> str | None:
    """A token of the running process ``pid`` (its start time where /proc has it), or None
    when no such process runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return "running"
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]  # starttime: a reused pid has a later one


class ParentWatch:
    """Ends this process when its parent (``parent``: the pid that forked it) or ``origin``
    (the process that iterates the DataLoader, when known) is gone."""

    def __init__(self, parent: int, origin: int | None = None) -> None:
        self.parent = parent
        self.origin = origin
        self._origin_started = None if origin is None else started(origin)
        self.armed = die_with_parent(signal.SIGKILL)
        if not self.armed:
            log.debug("kafeed loader: no PR_SET_PDEATHSIG here; relying on the watch thread")
        self.lost = threading.Event()  # set by the watching thread
        self.check()  # the parent may have died before the signal was armed

    def gone(self) -> bool:
        if self.lost.is_set() or os.getppid() != self.parent:
            return True
        return self.origin is not None and (self._origin_started is None
                                            or started(self.origin) != self._origin_started)

    def check(self) -> None:
        """End this process now if the parent is known to be gone (cheap: no /proc read)."""
        if self.lost.is_set() or os.getppid() != self.parent or (
                self.origin is not None and self._origin_started is None):
            os._exit(EXIT_PARENT_GONE)


_watch: tuple[int, ParentWatch] | None = None  # (this process's pid, its watch)


def watch_parent(origin: int | None = None) -> ParentWatch:
    """Arm the watch in this worker process, once (a later call returns the same watch).
    ``origin``: the pid of the process that started the DataLoader (with ``forkserver``
    that is not the direct parent)."""
    global _watch
    if _watch is not None and _watch[0] == os.getpid():
        return _watch[1]
    watch = ParentWatch(os.getppid(), origin)
    _watch = (os.getpid(), watch)
    _quiet_closed_connections()
    # A worker blocked on its queue never reaches check(); this thread does the looking.
    threading.Thread(target=_watch_origin, args=(watch,), name="kafeed-parent-watch",
                     daemon=True).start()
    return watch


def watch_worker(origin: int, worker_id: int) -> None:
    """DataLoader's ``worker_init_fn`` (with ``functools.partial(watch_worker, origin)``):
    the watch armed as the worker starts, before it waits on anything."""
    watch_parent(origin)


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
        time.sleep(LOOK_EVERY_S)
    watch.lost.set()
    os._exit(EXIT_PARENT_GONE)
