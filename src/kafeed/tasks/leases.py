"""The leases a worker holds, renewed by one heartbeat thread until each task's outcome ends it."""

from __future__ import annotations

import logging
import threading
import time

from kafeed.errors import KafeedError
from kafeed.tasks.model import TaskResult
from kafeed.tasks.writer import TaskWriter

log = logging.getLogger("kafeed")


class HeldLeases:
    """``running`` results of the tasks running here, rewritten every ``lease_s / 4`` with a new
    ``lease_until``. A lease released is never renewed after: renewal and release share a lock."""

    def __init__(self, writer: TaskWriter, lease_s: float, stop: threading.Event) -> None:
        self._writer = writer
        self.lease_s = lease_s
        self._stop = stop
        self._held: dict[str, TaskResult] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, lease: TaskResult) -> None:
        with self._lock:
            self._held[lease.key] = lease

    def release(self, key: str) -> None:
        with self._lock:
            self._held.pop(key, None)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._heartbeat, name="kafeed-lease", daemon=True)
        self._thread.start()

    def join(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout=timeout)

    def _heartbeat(self) -> None:
        every = max(0.2, self.lease_s / 4)
        while not self._stop.wait(every) or self._held:
            with self._lock:  # held while writing, so no renewal follows a lease's end
                now = time.time()
                for lease in self._held.values():
                    try:
                        self._writer.result_async(lease.model_copy(update={
                            "lease_until": now + self.lease_s, "written_at": now}))
                    except KafeedError as exc:
                        log.warning("could not renew the lease on %s: %s", lease.key, exc)
            if self._stop.is_set():
                time.sleep(every)
