"""The training loop shared by the reference trainers.

It owns what every trainer needs and none should write twice: distributed
setup, resume from the newest valid checkpoint, periodic and SIGTERM/SIGINT
checkpoints (model, optimizer and its schedule, RNG, step, loader state), mirroring
loader offsets to the consumer group after each checkpoint, live progress
(step, loss, tokens/s, data-wait share, consumer lag) and a metrics log.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from kafeed.signals import stop_request
from kafeed.train.checkpoint import CheckpointManager

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


def rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


_END = object()


class _Interrupted(BaseException):
    """Raised out of a wait for data when SIGTERM/SIGINT arrives.

    A BaseException, like KeyboardInterrupt: the wait may be inside a Kafka call whose
    ``except Exception`` would otherwise turn the stop into a metadata error.
    """


class Stateful(Protocol):
    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass
class Runner:
    """Run ``step_fn`` over batches from ``loader`` with checkpoints and progress.

    ``step_fn(batch) -> (loss, tokens)`` does forward, backward and optimizer step;
    ``optimizer`` (its schedule included) is saved with the model;
    ``manifest_fn(loader_state)`` adds JSON fields (lineage).

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
    log_every: int = 10
    run_dir: Path | None = None
    rank: int = 0
    world_size: int = 1
    gather_loader_state: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    after_checkpoint: Callable[[dict[str, Any]], None] | None = None
    manifest_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None
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

    def _loader_state(self) -> dict[str, Any]:
        state = self.loader.state_dict()
        return self.gather_loader_state(state) if self.gather_loader_state else state

    def save(self) -> str | None:
        loader_state = self._loader_state()  # collective under DDP: every rank calls it
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
        if self.after_checkpoint is not None:
            self.after_checkpoint(loader_state)
        return path

    def run(self) -> RunResult:
        start_step = self.step
        losses: list[float] = []
        tokens = 0
        wait = 0.0
        last_ckpt: str | None = None
        recorder = None
        if self.run_dir is not None and self.rank == 0:
            from kafeed.telemetry import MetricsRecorder

            recorder = MetricsRecorder(self.run_dir, interval=2.0)
            recorder.start()
        stop = stop_request()
        handler_before = signal.getsignal(signal.SIGTERM)
        stop.install()  # the CLI installed it first thing; a library caller gets it for this run
        installed_here = signal.getsignal(signal.SIGTERM) != handler_before
        waiting = False

        def leave_wait(_signum: int) -> None:
            nonlocal waiting
            if waiting:
                waiting = False
                raise _Interrupted

        remove = stop.on_signal(leave_wait)
        t0 = time.monotonic()
        window_t, window_tokens, window_wait = t0, 0, 0.0
        # a signal during imports and setup stops the run before its first batch
        stopped = stop.requested and self.step < self.total_steps
        saved_at = self.step
        self.model.train()
        try:
            batches: Iterator[Any] = iter(()) if stopped else iter(self.loader)
            if not stopped and self.step < self.total_steps and self.rank == 0:
                self.progress(f"train: waiting for data on {self.source}")
            while not stopped and self.step < self.total_steps:
                w0 = time.monotonic()
                batch: Any = _END
                try:
                    waiting = True
                    batch = next(batches, _END)
                    waiting = False
                except _Interrupted:  # leave_wait cleared ``waiting``: it cannot raise twice
                    stopped = True
                if batch is _END:  # the data's end, or a signal before the batch came
                    break
                # a batch that came with the signal is trained on: the loader counts it as handed out
                waited = time.monotonic() - w0
                loss, ntok = self.step_fn(batch)
                self.step += 1
                self.last_loss = loss
                _observe(waited, ntok, loss, self.step)
                wait += waited
                window_wait += waited
                tokens += ntok
                window_tokens += ntok
                losses.append(loss)
                if self.step % self.log_every == 0 or self.step == self.total_steps:
                    now = time.monotonic()
                    span = max(now - window_t, 1e-9)
                    lag = self.lag_fn() if self.lag_fn is not None else None
                    shown_lag = "-" if lag is None else f"{lag:,}"
                    figures = {"step": self.step, "loss": round(loss, 4),
                               "tokens_per_s": round(window_tokens / span * self.world_size, 1),
                               "data_wait_share": round(window_wait / span, 3),
                               "lag": lag, "time": time.time()}
                    if self.rank == 0:
                        self.progress(
                            f"step {self.step:>6}/{self.total_steps}  loss {loss:.4f}  "
                            f"tokens/s {figures['tokens_per_s']:>9,.0f}  "
                            f"data-wait {figures['data_wait_share']:.1%}  lag {shown_lag}")
                    if recorder is not None:
                        # loss and step are gauges already; add what only the loop knows
                        recorder.record(**{k: float(v) for k, v in figures.items()
                                           if k in ("tokens_per_s", "data_wait_share", "lag")
                                           and v is not None})
                    window_t, window_tokens, window_wait = now, 0, 0.0
                if self.checkpoint_every and self.step % self.checkpoint_every == 0:
                    last_ckpt = self.save() or last_ckpt
                    saved_at = self.step
                stopped = (stopped or stop.requested) and self.step < self.total_steps
            remove()  # from here on a signal only sets the flag: the checkpoint must be written
            if self.step != saved_at:  # the end of the run, a signal or the data's end
                last_ckpt = self.save() or last_ckpt
        finally:
            remove()
            if recorder is not None:
                recorder.close()
            if installed_here:
                stop.uninstall()
                stop.reset()
        return RunResult(
            steps=self.step, start_step=start_step,
            first_loss=losses[0] if losses else None,
            final_loss=losses[-1] if losses else self.last_loss,
            tokens=tokens * self.world_size, seconds=time.monotonic() - t0, data_wait_seconds=wait,
            checkpoint=last_ckpt, resumed_from=None, stopped_by_signal=stopped, losses=losses,
        )


def _observe(waited: float, tokens: int, loss: float, step: int) -> None:
    """The trainer's Prometheus figures (kafeed.telemetry.metrics), once per step."""
    from kafeed.telemetry import metrics as m

    m.DATA_WAIT.labels(stage="train").inc(waited)
    m.BATCHES.labels(stage="train").inc()
    m.TOKENS.labels(stage="train").inc(tokens)
    m.TRAIN_LOSS.labels(stage="train").set(loss)
    m.TRAIN_STEP.labels(stage="train").set(step)


def distributed_context() -> tuple[int, int]:
    """Initialise torch.distributed under torchrun (gloo on CPU, NCCL on GPU); (rank, world)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), dist.get_world_size()
