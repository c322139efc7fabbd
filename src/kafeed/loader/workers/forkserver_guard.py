"""The loader's forkserver ends with the trainer that started it.

StreamLoader names this module first in the forkserver's preload list; importing it there
asks the kernel to SIGKILL the forkserver when the trainer dies (``PR_SET_PDEATHSIG``). The
forkserver's workers have the same signal armed against the forkserver, so the trainer's
death takes the whole tree down (see kafeed.loader.workers.parent). Without this, the forkserver
waits for every holder of its liveness pipe, the workers among them, to close it.

Imported anywhere else (a trainer, a worker) it does nothing: the signal is armed only when
the import runs inside multiprocessing's forkserver ``main``. The trainer dying before the
import needs no signal: its end of the liveness pipe is closed, no worker holds one yet, so
the forkserver sees EOF and ends on its own.
"""

from __future__ import annotations

import signal
import sys

from kafeed.signals import die_with_parent


def in_forkserver() -> bool:
    """Whether this import runs as a preload of multiprocessing's forkserver."""
    from multiprocessing import forkserver

    main = forkserver.main.__code__
    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is main:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


if in_forkserver():
    die_with_parent(signal.SIGKILL)
