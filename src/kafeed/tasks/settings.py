"""Where a task queue lives and how it retries: one frozen settings model."""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field

from kafeed.errors import invalid_settings


class QueueSettings(BaseModel):
    """The topics of one task queue and its retry policy.

    ``<prefix>.<kind>`` holds each kind's tasks (shared by the share group
    ``kafeed-<prefix>.<kind>``), ``<prefix>.results`` (compacted) one result per idempotency
    key, ``<prefix>.parked`` the tasks that used up their attempts.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    prefix: str = Field(default="tasks", pattern=r"^[A-Za-z0-9._-]{1,100}$")
    partitions: int = Field(default=3, ge=1, le=1000)
    #: Exponential backoff: ``backoff_s * 2**(attempt-1)``, at most ``max_backoff_s``,
    #: shortened by up to ``jitter`` of itself at random so retries of many tasks spread out.
    backoff_s: float = Field(default=1.0, ge=0.0, le=86_400.0)
    max_backoff_s: float = Field(default=300.0, ge=0.0, le=86_400.0)
    jitter: float = Field(default=0.2, ge=0.0, le=1.0)

    def queue_topic(self, kind: str) -> str:
        return f"{self.prefix}.{kind}"

    def group(self, kind: str) -> str:
        return f"kafeed-{self.prefix}.{kind}"

    @property
    def results_topic(self) -> str:
        return f"{self.prefix}.results"

    @property
    def parked_topic(self) -> str:
        return f"{self.prefix}.parked"

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before attempt ``attempt + 1`` after attempt ``attempt`` failed."""
        base = min(self.max_backoff_s, self.backoff_s * 2.0 ** max(0, attempt - 1))
        return float(base * (1.0 - self.jitter * (rng or random).random()))


class WorkerSettings(BaseModel):
    """How one worker runs its tasks: threads, the share lock, the lease.

    A lease shorter than a second could not be read back and renewed (every quarter of
    it) before it ran out: the task would be requeued forever and never run.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    concurrency: int = Field(default=1, ge=1, le=256)
    #: Seconds a delivery stays locked to this worker: the share group's lock, 1-60 s.
    timeout_s: float = Field(default=30.0, ge=1.0, le=60.0)
    #: Seconds a running task's lease lasts without a heartbeat.
    lease_s: float = Field(default=10.0, ge=1.0, le=86_400.0)


def worker_settings(**fields: object) -> WorkerSettings:
    """Validated worker settings; ``None`` values mean "the default"."""
    try:
        return WorkerSettings(**{k: v for k, v in fields.items() if v is not None})  # type: ignore[arg-type]
    except ValueError as exc:
        raise invalid_settings(exc, what="task worker settings",
                               hint="Long tasks are still safe with a short --timeout: the lease "
                               "keeps a second worker off them.") from None


def queue_settings(**fields: object) -> QueueSettings:
    """Validated settings; ``None`` values mean "the default"."""
    try:
        return QueueSettings(**{k: v for k, v in fields.items() if v is not None})  # type: ignore[arg-type]
    except ValueError as exc:
        raise invalid_settings(exc, what="task queue settings") from None
