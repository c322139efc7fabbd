"""SIGTERM/SIGINT during a training run: a step finishes, a wait for the next batch is left at once.

:class:`StopHandling` holds the process's stop request (:func:`kafeed.signals.stop_request`)
for one run; :meth:`StopHandling.next_batch` hands out :data:`END` at the data's end or
when a signal cut the wait short.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

from kafeed.signals import stop_request

END = object()


class _Interrupted(BaseException):
    """Raised out of a wait for data when SIGTERM/SIGINT arrives.

    A BaseException, like KeyboardInterrupt: the wait may be inside a Kafka call whose
    ``except Exception`` would otherwise turn the stop into a metadata error.
    """


class StopHandling:
    """The process's stop request for one run: installed unless the caller had done it (and
    then given back), and able to cut a wait for the next batch short."""

    def __init__(self) -> None:
        self.stop = stop_request()
        handler_before = signal.getsignal(signal.SIGTERM)
        self.stop.install()  # the CLI installed it first thing; a library caller gets it for this run
        self._installed_here = signal.getsignal(signal.SIGTERM) != handler_before
        self._waiting = False
        self._remove = self.stop.on_signal(self._leave_wait)

    @property
    def requested(self) -> bool:
        return self.stop.requested

    def _leave_wait(self, _signum: int) -> None:
        if self._waiting:
            self._waiting = False
            raise _Interrupted

    def next_batch(self, batches: Iterator[Any]) -> tuple[Any, bool]:
        """The next batch (``END`` at the data's end) and whether a signal came while waiting.

        A batch that arrived together with the signal is returned with it.
        """
        batch: Any = END
        try:
            self._waiting = True
            if self.stop.requested:  # a signal that came just before this wait: do not block
                self._waiting = False
                return END, True
            batch = next(batches, END)
            self._waiting = False
        except _Interrupted:  # _leave_wait cleared ``_waiting``: it cannot raise twice
            return batch, True
        return batch, False

    def stop_leaving_waits(self) -> None:
        self._remove()

    def close(self) -> None:
        self._remove()
        if self._installed_here:
            self.stop.uninstall()
            self.stop.reset()
