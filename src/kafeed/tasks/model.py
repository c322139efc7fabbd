"""What travels on the task queue: a :class:`Task`, its attempts, and its results.

A task is one JSON record on its kind's queue topic, keyed by its idempotency key.
A result is one JSON record on the compacted results topic under the same key; the
last one for a key is the task's state (``running`` while a worker holds its lease).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kafeed.errors import ConfigError, invalid_settings

#: A result's status. ``running`` is a lease: the worker named in it holds the task until
#: ``lease_until``; ``retrying`` and ``queued`` end a lease without ending the task.
Status = Literal["running", "retrying", "queued", "succeeded", "parked", "cancelled", "expired"]
#: Statuses after which a copy of the task that is still on the queue is acknowledged unrun.
FINAL: frozenset[str] = frozenset({"succeeded", "cancelled"})
#: Kind names double as topic-name parts, so they keep to Kafka's topic alphabet.
KIND_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
RESERVED_KINDS = frozenset({"results", "parked"})


class Attempt(BaseModel):
    """One run of a task that did not succeed: who ran it, when, and what it raised."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempt: int
    worker: str
    started_at: float
    finished_at: float
    error: str


class Task(BaseModel):
    """A unit of work: ``kind`` picks the queue and handler, ``params`` is the handler's input.

    ``key`` is the idempotency key: a key that already has a succeeded result is never run
    again. ``priority`` orders the tasks a worker fetched together (higher first); the
    queue itself is first-in first-out per partition. ``deadline`` (epoch seconds) is when
    a task that has not started stops being worth running. ``attempt``, ``not_before`` and
    ``history`` are kept by the queue across retries.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    key: str = Field(min_length=1, max_length=1000)
    params: dict[str, Any] = Field(default_factory=dict)
    priority: int = 0
    deadline: float | None = None
    max_attempts: int = Field(default=3, ge=1, le=100)
    submitted_at: float = Field(default_factory=time.time)
    attempt: int = Field(default=1, ge=1)
    not_before: float = 0.0
    history: tuple[Attempt, ...] = ()

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if not KIND_PATTERN.match(value) or value in RESERVED_KINDS:
            raise ValueError("a kind is 1-100 letters, digits, '_' or '-', and not "
                             f"{' or '.join(sorted(RESERVED_KINDS))}")
        return value

    @field_validator("params")
    @classmethod
    def _params(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"params must be JSON-serialisable ({exc})") from None
        return value

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    def next_attempt(self, failure: Attempt, *, not_before: float) -> Task:
        """The copy that goes back on the queue after ``failure``."""
        return self.model_copy(update={"attempt": self.attempt + 1, "not_before": not_before,
                                       "history": (*self.history, failure)})


class TaskResult(BaseModel):
    """One record on the results topic: a lease while running, the outcome once finished."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    kind: str
    status: Status
    worker: str = ""
    lease_id: str = ""
    lease_until: float = 0.0
    attempt: int = 0
    output: Any = None
    error: str = ""
    submitted_at: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    written_at: float = Field(default_factory=time.time)
    history: tuple[Attempt, ...] = ()

    def encode(self) -> bytes:
        return self.model_dump_json().encode()


def make_task(**fields: Any) -> Task:
    """A :class:`Task` from user input; a bad field is one :class:`ConfigError` sentence."""
    try:
        return Task(**fields)
    except ValidationError as exc:
        raise invalid_settings(exc, what="task") from None


def parse_params(text: str) -> dict[str, Any]:
    """``--params`` text as a JSON object, or a :class:`ConfigError` saying why not."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"Task parameters are not JSON ({exc.msg} at character {exc.pos}).",
                          hint="Pass a JSON object, e.g. --params '{\"shard\": 3}'.") from None
    if not isinstance(value, dict):
        raise ConfigError(f"Task parameters must be a JSON object, not {type(value).__name__}.",
                          hint="Pass a JSON object, e.g. --params '{\"shard\": 3}'.")
    return value


def decode_task(value: bytes | None) -> Task | None:
    """A queue record's task, or None for a record that is no task (it gets rejected)."""
    if not value:
        return None
    try:
        return Task.model_validate_json(value)
    except ValidationError:
        return None


def decode_result(value: bytes | None) -> TaskResult | None:
    if not value:
        return None
    try:
        return TaskResult.model_validate_json(value)
    except ValidationError:
        return None
