"""The built-in ``ingest-file`` task: one file into a topic, exactly once, by a fleet of workers.

``kafeed tasks submit --kind ingest-file --dir DIR --params '{"topic": "raw"}'`` queues one
task per file; each ``kafeed tasks worker --kind ingest-file`` runs :func:`ingest_file`,
which is :func:`kafeed.ingest.ingest` on that one file under an ingest job id derived from
the task's key. A retry of the task (or a second run after its worker died) is the same
job: it resumes from the job's last committed transaction, and a finished job writes
nothing again, so every record of the file lands once however often the task runs.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kafeed.config import ConnectionSettings
from kafeed.errors import IngestError, invalid_settings
from kafeed.ingest.options import IngestOptions
from kafeed.ingest.run import ingest


class _Context(Protocol):
    """The part of :class:`kafeed.tasks.TaskContext` this handler uses."""

    @property
    def connection(self) -> ConnectionSettings: ...

    @property
    def key(self) -> str: ...

    @property
    def stop(self) -> threading.Event: ...


class FileTaskParams(BaseModel):
    """An ``ingest-file`` task's params: the file, the topic, and ingest options (not job_id)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1)
    topic: str = Field(min_length=1, max_length=249, pattern=r"^[A-Za-z0-9._-]+$")
    options: dict[str, Any] = Field(default_factory=dict)


def job_id_for_key(key: str) -> str:
    """An ingest job id (``[A-Za-z0-9._-]{1,100}``) that names the task key, one per key."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", key).strip("-")[-60:]
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"task-{readable}-{digest}" if readable else f"task-{digest}"


def ingest_file(params: dict[str, Any], context: _Context) -> dict[str, Any]:
    """The ``ingest-file`` handler: the ingest summary of the file's job."""
    try:
        spec = FileTaskParams.model_validate(params)
        options = IngestOptions.model_validate({**spec.options, "job_id": job_id_for_key(context.key)})
    except ValidationError as exc:
        raise invalid_settings(exc, what="ingest-file params") from None
    summary = ingest([spec.path], topic=spec.topic, settings=context.connection, options=options,
                     stop_event=context.stop)
    if summary.stopped:
        raise IngestError(f"Stopped before the end of {spec.path} (the worker is shutting down); "
                          f"job {summary.job_id} committed what it read and the retry resumes there.")
    return {"job_id": summary.job_id, "path": spec.path, "topic": spec.topic,
            "records_in": summary.records_in, "produced": summary.produced,
            "dead_lettered": summary.dead_lettered, "resumed": summary.resumed,
            "already_complete": summary.already_complete,
            "skipped_committed": summary.skipped_committed, "seconds": round(summary.seconds, 3)}
