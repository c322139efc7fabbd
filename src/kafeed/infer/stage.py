"""`kafeed infer` as a stage on :mod:`kafeed.stream`: a classifier serving a topic, exactly once.

One consumed batch is one forward pass and one transaction: the batch closes when
``batch_size`` records are there or ``max_wait_ms`` has passed (the latency bound),
whichever comes first. With ``follow`` the stage looks for a newer checkpoint in that
directory between batches (at most once a second) and switches to it; each prediction
names the checkpoint that made it, and the summary counts predictions per checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, invalid_settings
from kafeed.formats import Decoders, FormatSettings
from kafeed.infer.model import ServedModel, load_served_model, newest_manifest
from kafeed.infer.predict import PredictionBatch, predict_batch
from kafeed.stream import (
    BatchResult,
    KafkaTuning,
    Record,
    Stage,
    StreamProcessor,
    StreamSettings,
    StreamStats,
)
from kafeed.stream.settings import TOPIC_PATTERN
from kafeed.telemetry import metrics as m

log = logging.getLogger("kafeed")

Device = Literal["cpu", "cuda"]
FOLLOW_EVERY_S = 1.0


class InferSettings(BaseModel):
    """What `kafeed infer` reads and writes, and how it batches."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: str = Field(default="raw", pattern=TOPIC_PATTERN)
    output: str = Field(default="predictions", pattern=TOPIC_PATTERN)
    group: str = Field(default="kafeed-infer", min_length=1)
    dlq: str | None = Field(default=None, pattern=TOPIC_PATTERN)  # default: <input>.dlq
    instance: str | None = None
    batch_size: int = Field(default=32, ge=1, le=65_536)
    max_wait_ms: int = Field(default=100, ge=1, le=60_000)  # latency bound of a batch
    device: Device = "cpu"
    follow: Path | None = None
    idle_s: float = Field(default=3.0, gt=0)
    # The input topic's value format (docs/formats.md).
    formats: FormatSettings = FormatSettings()

    @property
    def dlq_topic(self) -> str:
        return self.dlq or f"{self.input}.dlq"

    def stream_settings(self) -> StreamSettings:
        if self.output in (self.input, self.dlq_topic):
            raise ConfigError(f"--output {self.output!r} is the input or dead-letter topic.",
                              hint="Write predictions to a topic of their own.")
        tuning = KafkaTuning(batch_size=self.batch_size, consume_timeout_s=self.max_wait_ms / 1000)
        return StreamSettings(inputs=(self.input,), outputs=(self.output,), group=self.group,
                              dlq_topic=self.dlq_topic, instance=self.instance, idle_s=self.idle_s,
                              kafka=tuning)


def infer_settings(**values: Any) -> InferSettings:
    """:class:`InferSettings` from flags (``None`` values dropped), as one :class:`ConfigError`."""
    try:
        return InferSettings(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise invalid_settings(exc, what="infer settings") from None


@dataclass(frozen=True)
class InferStats(StreamStats):
    """The core's counts plus predictions per checkpoint and how often the model changed."""

    by_checkpoint: dict[str, int] = field(default_factory=dict)
    model_switches: int = 0

    @property
    def predictions(self) -> int:
        return sum(self.records_out.values())

    @property
    def balanced(self) -> bool:
        """in = predictions + dead-lettered."""
        return self.records_in == self.predictions + self.dead_lettered

    def as_dict(self) -> dict[str, Any]:
        return super().as_dict() | {
            "predictions": self.predictions, "by_checkpoint": dict(self.by_checkpoint),
            "model_switches": self.model_switches, "balanced": self.balanced}


class InferStage(Stage[InferStats]):
    """Predicts each batch with the current model; switches models between batches when following."""

    name = "infer"

    def __init__(self, served: ServedModel, settings: InferSettings, *,
                 on_switch: Callable[[ServedModel], None] | None = None) -> None:
        self.served = served
        self.settings = settings
        self.decoders = Decoders(settings.formats)
        self.on_switch = on_switch
        self.by_checkpoint: Counter[str] = Counter()
        self.switches = 0
        self._next_look = 0.0

    def _follow(self) -> None:
        directory = self.settings.follow
        now = time.monotonic()
        if directory is None or now < self._next_look:
            return
        self._next_look = now + FOLLOW_EVERY_S
        newest = newest_manifest(directory)  # manifests are written last: a listed one is complete
        if newest is None or newest == self.served.manifest_path:
            return
        try:
            served = load_served_model(newest, device=self.settings.device)
        except ConfigError as exc:  # a checkpoint of another kind, or corrupt: keep serving this one
            log.warning("not switching to %s: %s", newest, exc.message)
            return
        log.info("switching model %s -> %s", self.served.checkpoint_id, served.checkpoint_id)
        self.served = served
        self.switches += 1
        if self.on_switch is not None:
            self.on_switch(served)

    def process(self, records: Sequence[Record]) -> PredictionBatch:
        self._follow()
        m.INFER_BATCH_SIZE.labels(stage=self.name).observe(len(records))
        return predict_batch(self.served, records, output=self.settings.output, decoders=self.decoders)

    def committed(self, result: BatchResult) -> None:
        assert isinstance(result, PredictionBatch)  # what process() returned
        if result.outputs:
            self.by_checkpoint[result.checkpoint] += len(result.outputs)
        m.observe_latencies(self.name, result.timestamps_ms)

    def report(self, stats: StreamStats) -> InferStats:
        return InferStats(**{f.name: getattr(stats, f.name) for f in fields(StreamStats)},
                          by_checkpoint=dict(self.by_checkpoint), model_switches=self.switches)


def resolve_device(device: Device) -> Device:
    """``device``, checked to exist here; raises :class:`ConfigError`."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for, but torch sees no CUDA device here.",
                          hint="Run on a machine with a GPU, or pass --device cpu.")
    return device


def run_infer(
    settings: InferSettings, checkpoint: Path, connection: ConnectionSettings, *,
    until_caught_up: bool = False, stop_event: threading.Event | None = None,
    on_progress: Callable[[InferStats], None] | None = None,
    on_switch: Callable[[ServedModel], None] | None = None,
) -> InferStats:
    """Serve ``checkpoint`` on ``settings.input`` until stopped (or caught up)."""
    stream = settings.stream_settings()
    served = load_served_model(checkpoint, device=resolve_device(settings.device))
    stage = InferStage(served, settings, on_switch=on_switch)
    return StreamProcessor(stage, stream, connection, stop_event=stop_event,
                           on_progress=on_progress).run(until_caught_up=until_caught_up)
