"""What an ingest run is asked to do (:class:`IngestOptions`) and what it did (:class:`IngestSummary`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kafeed.choices import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_MESSAGES,
    DEFAULT_LINGER_MS,
    Compression,
    RawFormat,
    StdinFormat,
    TextMode,
)

# Measured with `benchmarks/bench_ingest.py --sweep` (see docs/ingest.md): 100 ms and
# 1 MB batches cost the least client CPU per record; past ~20 ms the rate is flat.


class IngestOptions(BaseModel):
    """How sources map onto ``TrainingSample`` records and how they are produced.

    Field mapping: ``text_field`` holds the document text; ``id_field`` the id
    (absent → sha256 of the text, first ``id_hash_chars`` hex digits);
    ``label_field`` the targets (a number or a list of numbers); ``meta_fields``
    extra columns copied into metadata as strings.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text_field: str = Field(default="text", min_length=1)
    id_field: str = Field(default="id", min_length=1)
    label_field: str | None = Field(default=None, min_length=1)
    meta_fields: tuple[str, ...] = ()
    text_mode: TextMode = "line"
    stdin_format: StdinFormat = "jsonl"
    format: RawFormat = "protobuf"
    compression: Compression = "zstd"
    linger_ms: int = Field(default=DEFAULT_LINGER_MS, ge=0, le=60_000)
    batch_bytes: int = Field(default=DEFAULT_BATCH_BYTES, ge=1024, le=2**31 - 1)  # librdkafka's range
    batch_messages: int = Field(default=DEFAULT_BATCH_MESSAGES, ge=1, le=1_000_000)
    read_batch: int = Field(default=10_000, ge=1, le=1_000_000,
                            description="Records read and produced per step.")
    commit_records: int = Field(default=50_000, ge=1)
    # Below the transaction timeout (60 s), or a slow source would see its transactions aborted.
    commit_interval_ms: int = Field(default=2_000, ge=10, le=50_000)
    job_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._-]{1,100}$")
    restart: bool = False
    sql: str | None = None
    dsn: str | None = None
    id_hash_chars: int = Field(default=32, ge=8, le=64)
    preflight_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    # None: fail only a run that read records and dead-lettered all of them.
    max_dlq_ratio: float | None = Field(default=None, ge=0, le=1)


@dataclass(frozen=True)
class IngestProgress:
    """A progress tick: cumulative for this run."""

    records: int
    produced: int
    dead_lettered: int
    bytes_read: int
    total_bytes: int | None
    value_bytes: int


@dataclass(frozen=True)
class IngestSummary:
    """The closing numbers of one run.

    ``bytes_serialized`` is the sum of record values as serialized (before
    compression); ``seconds`` is the whole call, ``produce_seconds`` the part from
    the first read to the last commit (no connection setup); ``bytes_compressed``
    is what librdkafka's statistics report as sent to the brokers (broker
    ``txbytes``: compressed batches plus request framing, transaction calls,
    dead letters and progress markers, so a slight overestimate), or None when no statistics arrived.
    ``stopped`` is True when a stop request ended the run before its sources did.
    """

    job_id: str
    topic: str
    dlq_topic: str
    format: str
    records_in: int
    produced: int
    dead_lettered: int
    dead_letter_kinds: dict[str, int]
    per_partition: dict[int, int]
    bytes_serialized: int
    bytes_compressed: int | None
    seconds: float
    transactions: int
    resumed: bool
    already_complete: bool
    produce_seconds: float = 0.0
    skipped_committed: int = 0
    job_totals: dict[str, int] = field(default_factory=dict)
    stopped: bool = False

    @property
    def records_per_s(self) -> float:
        return self.records_in / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["per_partition"] = {str(k): v for k, v in self.per_partition.items()}
        out["records_per_s"] = round(self.records_per_s, 1)
        out["compressed_bytes_source"] = "librdkafka statistics: broker txbytes (wire bytes, all requests)"
        return out
