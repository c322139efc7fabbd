"""A :class:`KafeedError` raised in a DataLoader worker, carried to the main process as data."""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from kafeed.errors import KafeedError


@dataclass(frozen=True)
class WorkerError:
    """A :class:`KafeedError` raised in a DataLoader worker, sent to the main process as data.

    DataLoader re-raises a worker's exception as ``type(exc)(traceback text)``, which loses
    the message's shape, the hint and the code; this carries them so the caller gets the
    error exactly as it was raised.
    """

    kind: type[KafeedError]
    message: str
    hint: str | None
    code: int | None
    worker: int
    trace: str

    @classmethod
    def of(cls, exc: KafeedError, worker: int) -> WorkerError:
        return cls(type(exc), exc.message, exc.hint, exc.code, worker, traceback.format_exc())

    def error(self) -> KafeedError:
        return self.kind(self.message, hint=self.hint, code=self.code)
