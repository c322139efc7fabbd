"""The training loop shared by the reference trainers.

It owns what every trainer needs and none should write twice: resume from the
newest valid checkpoint, periodic and SIGTERM/SIGINT checkpoints (model, optimizer
and its schedule, RNG, step, loader state), mirroring loader offsets to the consumer
group after each checkpoint, live progress (step, loss, tokens/s, data-wait share,
consumer lag) and a metrics log. Its pieces: :mod:`~kafeed.train.checkpoint_policy`
(when to save), :mod:`~kafeed.train.stops` (signals), :mod:`~kafeed.train.rng`;
a trainer sets up its ranks with :mod:`~kafeed.train.distributed` first.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch

from kafeed.loader.state.rank_states import gather_states
from kafeed.train.checkpoint import CheckpointManager
from kafeed.train.checkpoint_policy import CheckpointPolicy
from kafeed.train.defaults import TRAIN_DEFAULTS
from kafeed.train.progress import ProgressReporter
from kafeed.train.rng import rng_state, set_rng_state
from kafeed.train.stops import END, StopHandling

if TYPE_CHECKING:
    from kafeed.telemetry import MetricsRecorder

log = logging.getLogger("kafeed")


class BatchSource(Protocol):
    """What the runner needs from a loader (kafeed's StreamLoader is one)."""

    def __iter__(self) -> Iterator[Any]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class RunResult:
    steps: int
    start_step: int
    first_loss: float | None
    final_loss: float | None
    tokens: int
    seconds: float
    data_wait_seconds: float
    checkpoint: str | None
    resumed_from: str | None
    stopped_by_signal: bool
    losses: list[float] = field(default_factory=list)

    @property
    def data_wait_share(self) -> float:
        return self.data_wait_seconds / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class Runner:
    """Run ``step_fn`` over batches from ``loader`` with checkpoints and progress.

    ``step_fn(batch) -> (loss, tokens)`` does forward, backward and optimizer step;
    ``optimizer`` (its schedule included) is saved with the model;
    ``manifest_fn(loader_state)`` adds JSON fields (lineage); ``on_checkpoint(step, path)``
    runs on rank 0 after each checkpoint is written (evaluation tasks), and ``eval_every``
    adds a checkpoint every that many steps for it.

    SIGTERM/SIGINT arrive through :func:`kafeed.signals.stop_request`: a step in progress
    finishes first, then a checkpoint is saved and :meth:`run` returns; a wait for the next
    batch (data may be slow to come, or the broker away) is left at once, since the loader
    state is taken from batches already handed out and nothing is lost by leaving it. A
    signal that arrived before :meth:`run` (while torch imported, say) stops it before the
    first batch. ``source`` names what the loop waits on, for its "waiting for data" line.
    """

    model: torch.nn.Module
    optimizer: Stateful
    loader: BatchSource
    step_fn: Callable[[Any], tuple[float, int]]
    checkpoints: CheckpointManager | None
    checkpoint_every: int
    total_steps: int
    log_every: int = TRAIN_DEFAULTS["log_every"]
    run_dir: Path | None = None
    rank: int = 0
    world_size: int = 1
    after_checkpoint: Callable[[dict[str, Any]], None] | None = None
    manifest_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    on_checkpoint: Callable[[int, str], None] | None = None
    eval_every: int = 0
    lag_fn: Callable[[], int | None] | None = None
    progress: Callable[[str], None] = print
    config: dict[str, Any] = field(default_factory=dict)
    source: str = "the loader"

    step: int = 0
    last_loss: float | None = None

    def resume(self) -> str | None:
        """Restore everything from the newest valid checkpoint; its path, or None."""
        if self.checkpoints is None:
            return None
        ckpt = self.checkpoints.load_latest()
        if ckpt is None:
            return None
        payload = ckpt.payload
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        set_rng_state(payload["rng"])
        self.loader.load_state_dict(payload["loader"])
        self.step = int(payload["step"])
        self.last_loss = payload.get("loss")
        log.info("resumed from %s at step %d", ckpt.path, self.step)
        return str(ckpt.path)

    def save(self) -> str | None:
        loader_state = gather_states(self.loader.state_dict())  # a collective: every rank calls it
        path = None
        if self.rank == 0 and self.checkpoints is not None:
            payload = {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "rng": rng_state(),
                "step": self.step,
                "loss": self.last_loss,
                "loader": loader_state,
                "config": self.config,
            }
            manifest = {"loss": self.last_loss, "loader": loader_state, "config": self.config}
            if self.manifest_fn is not None:
                manifest.update(self.manifest_fn(loader_state))
            path = str(self.checkpoints.save(self.step, payload, manifest=manifest))
            if self.on_checkpoint is not None:
                self.on_checkpoint(self.step, path)
        if self.after_checkpoint is not None:
            self.after_checkpoint(loader_state)
        return path

    def run(self) -> RunResult:
        start_step = self.step
        totals = _Totals()
        policy = CheckpointPolicy(every=self.checkpoint_every, saved_at=self.step,
                                  also_every=self.eval_every)
        stops = StopHandling()
        recorder = None
        frozen = _freeze_setup_objects()
        try:
            recorder = self._recorder()
            t0 = time.monotonic()
            reporter = ProgressReporter(
                total_steps=self.total_steps, log_every=self.log_every, rank=self.rank,
                world_size=self.world_size, show=self.progress, lag_fn=self.lag_fn, recorder=recorder)
            self.model.train()
            stopped = self._loop(stops, reporter, policy, totals)
            # from here on a signal only sets the flag: the checkpoint must be written
            stops.stop_leaving_waits()
            policy.at_end(self.step, self.save)  # the end of the run, a signal or the data's end
        finally:
            stops.close()
            if recorder is not None:
                recorder.close()
            if frozen:
                gc.unfreeze()
        return RunResult(
            steps=self.step, start_step=start_step,
            first_loss=totals.losses[0] if totals.losses else None,
            final_loss=totals.losses[-1] if totals.losses else self.last_loss,
            tokens=totals.tokens * self.world_size, seconds=time.monotonic() - t0,
            data_wait_seconds=totals.wait, checkpoint=policy.last, resumed_from=None,
            stopped_by_signal=stopped, losses=totals.losses,
        )

    def _recorder(self) -> MetricsRecorder | None:
        if self.run_dir is None or self.rank != 0:
            return None
        from kafeed.telemetry import MetricsRecorder

        return MetricsRecorder(self.run_dir, interval=2.0).start()

    def _loop(self, stops: StopHandling, reporter: ProgressReporter, policy: CheckpointPolicy,
              totals: _Totals) -> bool:
        """Step until ``total_steps``, the data's end or a stop request; True when a signal stopped it."""
        if stops.requested and self.step < self.total_steps:
            return True  # a signal during imports and setup stops the run before its first batch
        batches = iter(self.loader)
        if self.step < self.total_steps and self.rank == 0:
            self.progress(f"train: waiting for data on {self.source}")
        while self.step < self.total_steps:
            w0 = time.monotonic()
            batch, stopped = stops.next_batch(batches)
            if batch is END:  # the data's end, or a signal before the batch came
                return stopped
            # a batch that came with the signal is trained on: the loader counts it as handed out
            waited = time.monotonic() - w0
            loss, ntok = self.step_fn(batch)
            # Freed now, as part of the step: rebinding ``batch`` at the next wait would free
            # it inside the timed wait, where the prefetch thread (woken by the hand-over)
            # took the GIL and built its next batch while the loop waited (a third of steps).
            del batch
            self.step += 1
            self.last_loss = loss
            _observe(waited, ntok, loss, self.step)
            totals.add(loss, ntok, waited)
            reporter.step(self.step, loss, ntok, waited)
            policy.after_step(self.step, self.save)
            if (stopped or stops.requested) and self.step < self.total_steps:
                return True
        return False


@dataclass
class _Totals:
    """What the run's result sums up over its steps."""

    losses: list[float] = field(default_factory=list)
    tokens: int = 0
    wait: float = 0.0

    def add(self, loss: float, tokens: int, waited: float) -> None:
        self.losses.append(loss)
        self.tokens += tokens
        self.wait += waited


def _freeze_setup_objects() -> bool:
    """Collect once, then keep every object alive now (torch's modules, the model, the
    stream) out of the cyclic collector's passes for the run; True when this call froze
    them (objects the caller froze already stay the caller's to unfreeze).

    After torch is imported and a model built, the collector's first full pass walks
    hundreds of thousands of objects: ~70 ms, which fell on the first batch, in the middle
    of its wait (the first large allocation of the run tips the collector over), and
    later passes walk them again. Frozen, a full pass walks only what the run allocates.
    ``gc.unfreeze()`` at the end hands them back, so a process that trains again is not
    left holding what the first run let go."""
    if gc.get_freeze_count():
        return False
    gc.collect()
    gc.freeze()
    return True


def _observe(waited: float, tokens: int, loss: float, step: int) -> None:
    """The trainer's Prometheus figures (kafeed.telemetry.metrics), once per step."""
    from kafeed.telemetry import metrics as m

    m.DATA_WAIT.labels(stage="train").inc(waited)
    m.BATCHES.labels(stage="train").inc()
    m.TOKENS.labels(stage="train").inc(tokens)
    m.TRAIN_LOSS.labels(stage="train").set(loss)
    m.TRAIN_STEP.labels(stage="train").set(step)
