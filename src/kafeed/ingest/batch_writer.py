"""Writing one read batch: each record mapped, good ones to the topic, the rest to its dead-letter topic."""

from __future__ import annotations

import logging
import time

from kafeed.ingest.batches import Item, raw_bytes
from kafeed.ingest.mapping import Mapped, Mapper, Rejected
from kafeed.ingest.options import IngestOptions
from kafeed.ingest.producer import TxnWriter
from kafeed.ingest.sources import Source
from kafeed.ingest.transactions import Tally
from kafeed.kafka import dead_letter_headers, fit_value
from kafeed.schema.avro import format_headers

log = logging.getLogger("kafeed")

_ROW_KINDS = ("csv", "parquet", "sql")
_NO_FIELDS = Rejected("unknown", "no fields")


def where_key(source: Source) -> str:
    """The metadata key (and dead-letter header) naming a record's place in its source."""
    return "kafeed.row" if source.kind in _ROW_KINDS else "kafeed.line"


def dlq_headers(rejected: Rejected, source: Source, where: int, job: str) -> list[tuple[str, bytes]]:
    return dead_letter_headers(kind=rejected.kind, reason=rejected.reason, stage="ingest", extra=[
        ("kafeed.source", source.name.encode("utf-8", "replace")),
        (where_key(source), str(where).encode()), ("kafeed.job", job.encode())])


class BatchWriter:
    """Maps one read batch and produces it: good records to the topic, the rest to its DLQ."""

    def __init__(self, writer: TxnWriter, options: IngestOptions, job: str, *, max_message_bytes: int,
                 dlq_max_message_bytes: int) -> None:
        self.writer = writer
        # Room for key, headers and batch framing around the value (conservative: checked uncompressed).
        self.mapper = Mapper(options, max_value_bytes=max_message_bytes - 512 - options.id_hash_chars)
        self.dlq_limit = dlq_max_message_bytes
        self.headers = format_headers(options.format) or None
        self.job = job

    def write(self, src: Source, items: list[Item], txn: Tally) -> None:
        """The hot loop: one mapping call per record, one produce loop per batch."""
        self.mapper.context(src.name, where_key(src), int(time.time() * 1000))
        map_row = self.mapper.map_row
        good: list[Mapped] = []
        append = good.append
        nbytes = 0
        for item in items:
            rejected = item.reject
            if rejected is None and item.fields is not None:
                try:
                    result = map_row(item.fields, item.where)
                except Exception as exc:  # a row shape nobody foresaw must not stop the run
                    log.warning("unexpected error mapping %s:%d: %r", src.name, item.where, exc)
                    result = Rejected("unexpected", f"{type(exc).__name__}: {exc}"[:300])
                if not isinstance(result, Rejected):
                    append(result)
                    nbytes += len(result[1])
                    continue
                rejected = result
            self._dead_letter(src, item, rejected or _NO_FIELDS, txn)
        self.writer.produce_all(good, self.headers)
        txn.records += len(items)
        txn.produced += len(good)
        txn.value_bytes += nbytes

    def _dead_letter(self, src: Source, item: Item, rejected: Rejected, txn: Tally) -> None:
        headers = dlq_headers(rejected, src, item.where, self.job)
        value = fit_value(raw_bytes(item), headers, self.dlq_limit) or b""
        self.writer.dead_letter(f"{src.name}:{item.where}".encode("utf-8", "replace"), value, headers)
        txn.dead += 1
        txn.kinds[rejected.kind] += 1
