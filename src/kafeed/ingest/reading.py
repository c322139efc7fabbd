"""Reading every source a run has left, from the job's resume point, in batches a stop can cut short.

:class:`SourceBatches` walks the sources and moves the job's position from one to the next;
:class:`ReadGate` lets SIGINT/SIGTERM interrupt a read that blocks (stdin waiting for input).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from kafeed.errors import IngestError
from kafeed.ingest import readers
from kafeed.ingest.batches import Batch, Item, Position
from kafeed.ingest.options import IngestOptions
from kafeed.ingest.progress import JobProgress
from kafeed.ingest.sources import Source
from kafeed.signals import stop_request


class ReadInterrupted(BaseException):
    """A stop signal arrived while the reader was blocked waiting for input.

    A BaseException, like KeyboardInterrupt, so a reader's ``except Exception``
    (a database driver's errors) does not turn it into a read failure.
    """


class ReadGate:
    """Lets a SIGINT/SIGTERM interrupt a read that blocks (stdin waiting for input).

    A blocked ``read`` is retried after a signal (PEP 475), so a stop request alone
    would wait for the next line. While :meth:`next` reads, the process's stop
    handler raises :class:`ReadInterrupted` instead. Only the read is interrupted: the
    batch it was assembling was never produced and the progress marker still points
    before it, so committing the open transaction then is exact.
    """

    def __init__(self) -> None:
        self._open = False
        self._remove = stop_request().on_signal(self._on_signal)

    def _on_signal(self, signum: int) -> None:
        if self._open:
            self._open = False
            raise ReadInterrupted(signum)

    def next(self, batches: Iterator[Batch]) -> Batch | None:
        """The next batch, None at the end; :class:`ReadInterrupted` when a signal cut the read short.

        Only a read on the main thread opens the gate: the handler raises in the main
        thread, so a run on another thread (a task worker's) stops at ``stop_event`` instead.
        """
        self._open = threading.current_thread() is threading.main_thread()
        try:
            return next(batches, None)
        finally:
            self._open = False

    def close(self) -> None:
        self._open = False
        self._remove()


class SourceBatches:
    """The read batches of every source left, from the job's resume point on.

    Iterating yields ``(source index, source, items, position)``; the caller moves the job's
    position past a batch once it wrote it. A source read to its end moves it to the next
    source. A stop request (``stop_event`` or a signal during a read) ends the iteration
    early with ``stopped`` set.
    """

    def __init__(self, srcs: list[Source], progress: JobProgress, options: IngestOptions,
                 gate: ReadGate, stop_event: threading.Event) -> None:
        self.srcs = srcs
        self.progress = progress
        self.options = options
        self.gate = gate
        self.stop_event = stop_event
        self.stopped = False
        self.total_bytes = None if any(s.size is None for s in srcs) else sum(s.size or 0 for s in srcs)
        self._done_bytes = sum(s.size or 0 for s in srcs[:progress.index])

    def __iter__(self) -> Iterator[tuple[int, Source, list[Item], Position]]:
        progress = self.progress
        for index in range(progress.index, len(self.srcs)):
            src = self.srcs[index]
            start = Position(progress.offset, progress.record) if index == progress.index else Position()
            for items, pos in self._batches(src, start):
                yield index, src, items, pos
            if self.stopped:
                return
            self._done_bytes += src.size or 0
            progress.index, progress.offset, progress.record = index + 1, 0, 0

    def _batches(self, src: Source, start: Position) -> Iterator[Batch]:
        batches = readers.read_source(src, self.options, start)
        while not self.stop_event.is_set():
            try:
                batch = self.gate.next(batches)
            except ReadInterrupted:
                break
            except OSError as exc:
                raise IngestError(f"Reading {src.name} failed: {exc}.",
                                  hint="Fix the source and re-run the same command: it resumes.") from exc
            if batch is None:
                return
            yield batch
        self.stopped = True

    def bytes_read(self, src: Source, pos: Position) -> int:
        """Source bytes read so far, for progress (row sources count only when finished)."""
        if src.kind in ("parquet", "sql"):
            return self._done_bytes
        return self._done_bytes + (pos.offset if pos.source_bytes is None else pos.source_bytes)
