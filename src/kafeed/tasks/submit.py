"""Putting tasks on the queue: the Python API behind `kafeed tasks submit`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.tasks.model import Task, make_task
from kafeed.tasks.queue import ensure_topics
from kafeed.tasks.settings import QueueSettings
from kafeed.tasks.writer import TaskWriter
from kafeed.topics import TopicAdmin


def submit_tasks(connection: ConnectionSettings, tasks: Iterable[Task], *,
                 settings: QueueSettings | None = None, create_queue: bool = False) -> int:
    """Write ``tasks`` to their kinds' queues; returns how many. A kind without a queue topic
    is an unknown kind (:class:`ConfigError`) unless ``create_queue``."""
    settings = settings or QueueSettings()
    tasks = list(tasks)
    kinds = sorted({t.kind for t in tasks})
    ensure_topics(TopicAdmin(connection), settings, kinds, create_queues=create_queue)
    writer = TaskWriter(connection, settings)
    n = writer.tasks(tasks)
    writer.flush()
    return n


def submit(connection: ConnectionSettings, kind: str, key: str, params: dict[str, Any] | None = None,
           *, priority: int = 0, deadline: float | None = None, max_attempts: int = 3,
           settings: QueueSettings | None = None, create_queue: bool = False) -> Task:
    """Submit one task and return it as queued (``kafeed.tasks.submit``)."""
    task = make_task(kind=kind, key=key, params=params or {}, priority=priority,
                     deadline=deadline, max_attempts=max_attempts)
    submit_tasks(connection, [task], settings=settings, create_queue=create_queue)
    return task


def directory_tasks(kind: str, directory: Path, params: dict[str, Any], *, key_prefix: str | None = None,
                    **fields: Any) -> list[Task]:
    """One task per file directly in ``directory`` (sorted; hidden files left out): ``params``
    plus ``"path"``, the file's absolute path. The key is ``<prefix>:<path>``, the prefix
    ``key_prefix`` or the kind (and the ``topic`` param, when there is one), so submitting a
    directory again queues no new work for files already done."""
    if not directory.is_dir():
        raise ConfigError(f"{str(directory)!r} is not a directory.", hint="Pass --dir DIRECTORY.")
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise ConfigError(f"Directory {str(directory)!r} holds no files to make tasks of.")
    if key_prefix is None:
        key_prefix = f"{kind}:{params['topic']}" if "topic" in params else kind
    return [make_task(kind=kind, key=f"{key_prefix}:{path.absolute()}",
                      params={**params, "path": str(path.absolute())}, **fields) for path in files]


def read_task_file(path: Path) -> Iterator[Task]:
    """One task per JSON line (``kind``, ``key``, ``params`` and the optional fields)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"Cannot read task file {str(path)!r}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"Task file {str(path)!r} is not UTF-8 text.",
                          hint="Write one JSON object per line with kind, key and params.") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            fields = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number} is not JSON ({exc.msg}).",
                              hint="Write one JSON object per line with kind, key and params.") from None
        if not isinstance(fields, dict) or not {"kind", "key", "params"} <= fields.keys():
            raise ConfigError(f"{path}:{number} is not a JSON object with kind, key and params.",
                              hint="Write one JSON object per line with kind, key and params.")
        allowed = {"kind", "key", "params", "priority", "deadline", "max_attempts"}
        extra = sorted(fields.keys() - allowed)
        if extra:
            raise ConfigError(f"{path}:{number} has fields a task does not take: {', '.join(extra)}.",
                              hint=f"A task line takes {', '.join(sorted(allowed))}.")
        try:
            yield make_task(**fields)
        except ConfigError as exc:
            raise ConfigError(f"{path}:{number}: {exc.message}", hint=exc.hint) from None
