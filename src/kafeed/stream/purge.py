"""Purging a stream step's input (``purge_input_every_s``), the way Kafka Streams purges its
repartition topics: for an internal topic only this step's group reads, the records below
the positions this process committed are deleted at most that often, and once more at the end.
"""

from __future__ import annotations

import logging
import time

from kafeed.errors import KafeedError
from kafeed.stream.batch import RecordBatch
from kafeed.topics import TopicAdmin

log = logging.getLogger("kafeed")


class InputPurge:
    """The committed positions of ``topic`` not yet purged, and when the next purge is due."""

    def __init__(self, topic: str, every: float | None) -> None:
        self.topic = topic
        self.every = every
        self._purgeable: dict[int, int] = {}  # input partition -> committed position not yet purged
        self._purged_at = time.monotonic()

    def committed(self, records: RecordBatch) -> None:
        """Note the input positions of a committed batch (nothing when purging is off)."""
        if self.every is None:
            return
        for (topic, partition), offset in records.positions().items():
            if topic == self.topic and offset > self._purgeable.get(partition, -1):
                self._purgeable[partition] = offset

    def purge(self, admin: TopicAdmin | None, *, final: bool = False) -> None:
        """Delete the input's records below the committed positions, at most every ``every`` seconds."""
        every = self.every
        if every is None or admin is None or not self._purgeable:
            return
        now = time.monotonic()
        if not final and now - self._purged_at < every:
            return
        self._purged_at = now
        before, self._purgeable = self._purgeable, {}
        try:
            admin.delete_records(self.topic, before, wait=final)
        except KafeedError as exc:  # the records stay until the next purge or the retention
            log.warning("%s", exc)
