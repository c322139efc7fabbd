"""The task queue on Kafka share groups (docs/tasks.md).

Tasks go to ``<prefix>.<kind>``; workers of a kind share it through one share group,
acknowledge each delivery explicitly, write one result per idempotency key to the
compacted ``<prefix>.results`` and park tasks that used up their attempts in
``<prefix>.parked``.
"""

from __future__ import annotations

from kafeed.tasks.handlers import TaskContext, load_handler
from kafeed.tasks.model import Attempt, Task, TaskResult, make_task
from kafeed.tasks.settings import QueueSettings, queue_settings
from kafeed.tasks.submit import directory_tasks, read_task_file, submit, submit_tasks
from kafeed.tasks.worker import Worker
from kafeed.tasks.worker_stats import WorkerStats

__all__ = [
    "Attempt",
    "QueueSettings",
    "Task",
    "TaskContext",
    "TaskResult",
    "Worker",
    "WorkerStats",
    "directory_tasks",
    "load_handler",
    "make_task",
    "queue_settings",
    "read_task_file",
    "submit",
    "submit_tasks",
]
