"""``kafeed train --eval-every N``: one ``evaluate`` task per checkpoint the run writes.

The task's idempotency key is ``<run>/step-<step>``, where the run is named by its
checkpoint directory (its name and a hash of its absolute path): a resumed run that writes
the same step again, or a resubmission, is evaluated once.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.tasks.model import make_task
from kafeed.tasks.queue import ensure_topics
from kafeed.tasks.settings import QueueSettings
from kafeed.tasks.writer import TaskWriter
from kafeed.telemetry import metrics as m
from kafeed.topics import TopicAdmin
from kafeed.train.options import TrainOptions

log = logging.getLogger("kafeed")

EVAL_KIND = "evaluate"


def run_name(checkpoint_dir: Path) -> str:
    """A run's name in task keys: its checkpoint directory's name and a hash of its path."""
    path = checkpoint_dir.absolute()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"{path.name or 'run'}-{digest}"


def eval_key(run: str, step: int) -> str:
    return f"{run}/step-{step:08d}"


class EvalSubmitter:
    """Submits an ``evaluate`` task for a checkpoint; its queue is created when first built."""

    def __init__(self, connection: ConnectionSettings, options: TrainOptions, *,
                 progress: Callable[[str], None] = print) -> None:
        self.settings = QueueSettings(prefix=options.tasks_prefix)
        self.run = run_name(options.checkpoint_dir)
        self.run_dir = None if options.run_dir is None else str(options.run_dir.absolute())
        self.records = options.eval_records
        self.progress = progress
        ensure_topics(TopicAdmin(connection), self.settings, [EVAL_KIND])
        self._writer = TaskWriter(connection, self.settings)

    def __call__(self, step: int, checkpoint: str) -> None:
        """Submit the evaluation of ``checkpoint``; a failure is a warning, not the run's end."""
        task = make_task(kind=EVAL_KIND, key=eval_key(self.run, step), params={
            "checkpoint": str(Path(checkpoint).absolute()), "run": self.run, "run_dir": self.run_dir,
            "records": self.records})
        try:
            self._writer.tasks([task])
            self._writer.flush()
        except KafeedError as exc:
            log.warning("could not submit the evaluation of step %d: %s", step, exc)
            return
        m.TASKS_SUBMITTED.labels(kind=EVAL_KIND).inc()
        self.progress(f"train: evaluate task {task.key} submitted to {self.settings.queue_topic(EVAL_KIND)}")
