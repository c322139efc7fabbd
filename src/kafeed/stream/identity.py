"""A stable worker identity: ``<hostname>-<slot>``, the lowest slot no live local process holds.

The slot is an exclusive ``flock`` on a file under ``$KAFEED_HOME/<stage>/<group>/``; the
kernel drops it when the process dies, so a restarted worker gets its old slot
back, reuses its ``transactional.id``, and ``init_transactions`` aborts whatever
the dead one left open instead of waiting out the transaction timeout.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
from typing import IO

from kafeed.home import kafeed_home


class InstanceLock:
    """Holds a slot for the life of the process (or until :meth:`release`)."""

    def __init__(self, name: str, handle: IO[str] | None) -> None:
        self.name = name
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


def claim_instance(stage: str, group: str, explicit: str | None = None, *,
                   max_slots: int = 1024) -> InstanceLock:
    if explicit:
        return InstanceLock(_safe(explicit), None)
    directory = kafeed_home() / _safe(stage) / _safe(group)
    directory.mkdir(parents=True, exist_ok=True)
    host = _safe(socket.gethostname())
    for slot in range(max_slots):
        handle = (directory / f"slot-{slot}.lock").open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return InstanceLock(f"{host}-{slot}", handle)
    return InstanceLock(f"{host}-pid{os.getpid()}", None)
