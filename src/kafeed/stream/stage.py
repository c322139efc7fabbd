"""The one thing a stage writes: a batch function, plus hooks for the state it keeps."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from kafeed.stream.records import BatchResult, Record
from kafeed.stream.stats import StreamStats

ReportT = TypeVar("ReportT")


class Stage(ABC, Generic[ReportT]):
    """A pure batch function over input records, and the per-partition state behind it.

    The core calls :meth:`process` on the main thread with every batch in offset order
    per partition, then :meth:`finish` on the result (on the commit thread); what that
    leaves is produced and committed with the batch's input positions in one transaction.
    A stateless stage implements :meth:`process` and :meth:`report` only. A stateful one
    keeps its changes of a batch *pending* until :meth:`committed` (batches commit in
    order, at most two are pending at once) and forgets every pending change on
    :meth:`rolled_back` (the core rereads those batches).
    """

    #: Metrics label, transactional-id prefix and instance-slot directory.
    name: str = "stage"
    #: The changelog holds snapshots (:mod:`kafeed.stream.snapshots`): on assignment the core
    #: hands :meth:`restore` the newest snapshot and what follows it, not the whole history.
    snapshots: bool = False
    #: Offsets back from the end where the newest snapshot is expected to start (transaction
    #: markers count: one per transaction and partition); the search widens when it is not.
    snapshot_window: int = 256

    @abstractmethod
    def process(self, records: Sequence[Record]) -> BatchResult:
        """Outputs, dead letters and state changes for ``records``; must not raise for bad data."""

    @abstractmethod
    def report(self, stats: StreamStats) -> ReportT:
        """The stage's summary, given the core's counts over committed batches."""

    def bind(self, max_message_bytes: Mapping[str, int]) -> None:
        """Called once before the first batch with each output topic's ``max.message.bytes``."""

    def finish(self, result: BatchResult) -> None:
        """Complete ``result`` in place: collect work :meth:`process` left running in threads of its own.

        Called on the core's commit thread (with ``overlap_commit``) just before the batch's
        transaction begins, while the main thread consumes and processes the next batch: a
        stage whose heavy step releases the GIL (a tokenizer) starts it in :meth:`process`
        and waits for it here. Must not raise for bad data. The default does nothing.
        """

    def committed(self, result: BatchResult) -> None:
        """The oldest pending batch committed: make its state changes (and counts) real."""

    def rolled_back(self) -> None:
        """A transaction aborted: drop every pending change; the batches will be read again."""

    def restore(self, partition: int, changelog: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Partition ``partition`` was assigned: its state, from the committed changelog records."""

    def drop(self, partition: int) -> None:
        """Partition ``partition`` was revoked: forget its state."""

    def close(self) -> None:
        """Release helper threads and the like; called once after the last batch."""
