"""The commit a sink is assembling: its rows, chunk by chunk, and their data files, written on a
helper thread while the sink consumes the next records.

The sink seals what it has buffered into a chunk every :data:`CHUNKS_PER_COMMIT`-th of a commit's
size (and at the commit); each chunk's rows (one Arrow table in (partition, offset) order) go to
one helper thread that writes their Parquet data files (kafeed.archive.append), while the
consuming thread goes on fetching and decoding: pyarrow encodes and compresses without holding
the GIL. At the commit the sink waits for the files and appends them all in one snapshot with
the positions; which rows may go in is decided then, against the table (kafeed.archive.commit).

Exactly once does not depend on the helper: files are invisible until a snapshot references
them, so a crash while one is written, or between the write and the commit, leaves orphan files
and a table that still says where to resume. When the commit may not take every row (the table
moved on, a partition was lost in a rebalance, a write failed), the files are not used: the rows
that may go in are written again, filtered, and the first files are orphans too.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any

import numpy as np

from kafeed.archive.append import write_data_files
from kafeed.archive.rows import RecordBatch, RowMapper
from kafeed.archive.schema import Kind

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("kafeed")
#: A commit's rows are written as this many chunks (files), the first ones while consuming.
CHUNKS_PER_COMMIT = 4


class PendingCommit:
    """Rows sealed for the next commit, and the files being written for them."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        #: Per partition: (first offset, last offset + 1) of the sealed rows.
        self.ranges: dict[int, tuple[int, int]] = {}
        self.chunks: list[pa.Table] = []
        self._counts: dict[int, int] = {}  # rows per partition
        self.value_bytes = 0
        self._writes: list[Future[list[Any]]] = []
        self._files_usable = True  # the written files hold exactly the rows in ranges

    def __bool__(self) -> bool:
        return bool(self.chunks)

    @property
    def records(self) -> int:
        """Rows sealed, of the partitions still in :attr:`ranges`."""
        return sum(self._counts.values())

    def add(self, table: Any, rows: pa.Table, ranges: dict[int, tuple[int, int]], value_bytes: int) -> None:
        """Seal ``rows`` (of the partitions in ``ranges``, each continuing where the previous chunk
        of that partition ended) and start writing their files on the helper thread."""
        for p, (first, end) in ranges.items():
            had = self.ranges.get(p)
            self.ranges[p] = (first, end) if had is None else (min(had[0], first), max(had[1], end))
        self.chunks.append(rows)
        parts, counts = np.unique(rows["partition"].to_numpy(), return_counts=True)
        for p, n in zip(parts.tolist(), counts.tolist(), strict=True):
            self._counts[p] = self._counts.get(p, 0) + n
        self.value_bytes += value_bytes
        # The table's metadata and FileIO as of now: the consuming thread may refresh the table
        # meanwhile, and a file is written against one state of it.
        self._writes.append(self.executor.submit(write_data_files, table.metadata, table.io, rows))

    def drop(self, partitions: set[int]) -> None:
        """Forget the rows of ``partitions`` (lost in a rebalance): the files still hold them, so the
        commit writes the rest again."""
        if partitions & self.ranges.keys():
            for p in partitions:
                self.ranges.pop(p, None)
                self._counts.pop(p, None)
            self._files_usable = False

    def files(self) -> list[Any] | None:
        """The data files of every chunk, once written; None if they cannot be used as they are
        (rows dropped, or a write failed: then its error is raised, once)."""
        if not self._files_usable:
            self.wait()
            return None
        out: list[Any] = []
        for i, write in enumerate(self._writes):
            try:
                out.extend(write.result())
            except BaseException:
                self._files_usable = False
                self._writes = self._writes[i + 1:]
                self.wait()
                raise
        return out

    def rows(self, keep_from: dict[int, int]) -> pa.Table:
        """The sealed rows of the partitions in ``keep_from``, each from its offset on."""
        import pyarrow as pa
        import pyarrow.compute as pc

        rows = pa.concat_tables(self.chunks)
        mask = None
        for p, first in keep_from.items():
            cond = pc.and_(pc.equal(rows["partition"], pa.scalar(p, pa.int32())),
                           pc.greater_equal(rows["offset"], pa.scalar(first, pa.int64())))
            mask = cond if mask is None else pc.or_(mask, cond)
        return rows.filter(mask) if mask is not None else rows.slice(0, 0)

    def wait(self) -> None:
        """Let the writes in flight end (their files become orphans), whatever their outcome."""
        for write in self._writes:
            if not write.cancel():
                try:
                    write.result()
                except Exception as exc:  # the rows are written again or reread; log only
                    log.debug("kafeed archive: a data file write failed: %s", exc)
        self._writes = []


def warm_up(kind: Kind) -> None:
    """Load what building and writing the first chunk would (pyarrow's kernels and Parquet writer,
    pyiceberg's commit path): a few seconds' imports in a fresh interpreter, paid at the start
    rather than while the first records wait. Writes nothing."""
    import io

    import pyarrow.parquet as pq
    import pyiceberg.manifest
    import pyiceberg.table.update.snapshot  # noqa: F401

    from kafeed.schema import make_document

    batch = RecordBatch("warm-up")
    batch.add(0, 0, 0, None, make_document([1, 2], id="w", vocab_size=3).SerializeToString())
    pq.write_table(RowMapper(kind).rows(batch), io.BytesIO(), compression="zstd")
