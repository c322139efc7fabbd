"""Job identity and progress markers in the compacted topic ``__kafeed_ingest_progress``.

A marker is produced in the same transaction as the records it covers, keyed
by the job id, so "the latest committed marker" (read_committed) is exactly
how far the topic holds the job's records. The marker value is JSON::

    {"version": 1, "job": "...", "sources": [identity, ...], "index": i,
     "offset": bytes, "record": n, "finished": false,
     "totals": {"produced": ..., "dead_lettered": ...}, "updated_ms": ...}

``index`` is the source being read; ``offset``/``record`` the position inside it
where the next record starts.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import ResumeMismatch
from kafeed.ingest.options import IngestOptions
from kafeed.ingest.sources import redact_dsn
from kafeed.kafka import KafkaClients

PROGRESS_TOPIC = "__kafeed_ingest_progress"
MARKER_VERSION = 1


def job_id_for(topic: str, args: list[str], options: IngestOptions) -> str:
    """A stable id for (topic, sources, mapping): the same command resumes the same job.

    stdin has no identity to hash, so without ``--job-id`` every stdin run is a new job
    (two different streams must not look like one finished job).
    """
    if options.job_id:
        return options.job_id
    norm = [a if a == "-" else str(Path(a).absolute()) for a in args]
    spec = {
        "topic": topic,
        "sources": norm,
        "sql": options.sql,
        "dsn": redact_dsn(options.dsn) if options.dsn else None,
        "stdin_run": uuid.uuid4().hex if "-" in args else None,
        "mapping": [options.text_field, options.id_field, options.label_field, list(options.meta_fields),
                    options.text_mode, options.stdin_format, options.format, options.id_hash_chars],
    }
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    return f"ingest-{digest}"


@dataclass
class JobProgress:
    """Where a job stands; what a marker stores. ``state_dict`` has constant keys and a version."""

    job: str
    sources: list[str]
    index: int = 0
    offset: int = 0
    record: int = 0
    finished: bool = False
    totals: dict[str, int] = field(default_factory=lambda: {"produced": 0, "dead_lettered": 0})

    def state_dict(self) -> dict[str, Any]:
        return {"version": MARKER_VERSION, "job": self.job, "sources": list(self.sources),
                "index": self.index, "offset": self.offset, "record": self.record,
                "finished": self.finished, "totals": dict(self.totals),
                "updated_ms": int(time.time() * 1000)}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> JobProgress:
        if state.get("version") != MARKER_VERSION:
            raise ResumeMismatch(f"Progress marker version {state.get('version')!r} is not {MARKER_VERSION}.",
                                 hint="Re-run with --restart.")
        return cls(job=str(state["job"]), sources=[str(s) for s in state["sources"]],
                   index=int(state["index"]), offset=int(state["offset"]), record=int(state["record"]),
                   finished=bool(state["finished"]),
                   totals={k: int(v) for k, v in state["totals"].items()})

    def check_sources(self, identities: list[str]) -> None:
        """Refuse to resume over sources that changed since the marker was written."""
        if identities == self.sources:
            return
        changed = [s.split("|")[0] for s in identities if s not in self.sources]
        gone = [s.split("|")[0] for s in self.sources if s not in identities]
        what = "; ".join(filter(None, [f"changed or new: {', '.join(changed)}" if changed else "",
                                       f"gone: {', '.join(gone)}" if gone else ""])) or "order changed"
        raise ResumeMismatch(
            f"The sources of job {self.job} changed since its last committed progress ({what}).",
            hint="Re-run with --restart to ingest from the beginning, or pass a new --job-id.",
        )


def read_latest(settings: ConnectionSettings, job: str, *, timeout: float = 60.0) -> JobProgress | None:
    """The job's latest committed marker (read_committed), or None when it never committed."""
    key = job.encode()
    latest: bytes | None = None
    for msg in KafkaClients(settings).read_to_end(
            PROGRESS_TOPIC, [0], timeout_s=timeout,
            hint="Another ingest may hold a transaction open there: retry in a minute."):
        if msg.key() == key:
            latest = msg.value()
    if latest is None:
        return None
    return JobProgress.from_state_dict(json.loads(latest))
