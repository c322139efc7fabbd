"""Finding a kind's handler: ``module:function`` from ``--handler``, a built-in kind, or an
entry point.

A handler is a plain callable: it takes the task's params dict and returns a
JSON-serialisable result; raising means the attempt failed. A handler with a parameter
named ``context`` also gets a :class:`TaskContext`: the worker's connection, the task's
key and attempt, and the worker's stop event.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError

Handler = Callable[..., Any]
#: Packages register handlers as ``[project.entry-points."kafeed.tasks"] kind = "module:function"``.
ENTRY_POINT_GROUP = "kafeed.tasks"
#: The kinds kafeed itself handles; named as strings so a worker imports only its own kind's
#: code (and the layering holds: these live above, or beside, the queue).
BUILTIN: dict[str, str] = {
    "evaluate": "kafeed.train.evaluate:evaluate",
    "ingest-file": "kafeed.ingest.filetask:ingest_file",
}


@dataclass(frozen=True)
class TaskContext:
    """What a handler that asks for ``context`` gets besides its params."""

    connection: ConnectionSettings
    kind: str
    key: str
    attempt: int
    worker: str
    stop: threading.Event


def wants_context(handler: Handler) -> bool:
    """Whether ``handler`` takes a parameter named ``context``."""
    try:
        return "context" in inspect.signature(handler).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


def load_handler(spec: str | None, kind: str) -> Handler:
    """The handler named by ``spec``, else kafeed's built-in ``kind``, else the entry point
    registered for ``kind``."""
    if spec is None and kind in BUILTIN:
        spec = BUILTIN[kind]
    if spec is None:
        from importlib.metadata import entry_points

        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == kind]
        if not found:
            raise ConfigError(f"No handler for task kind {kind!r}: none given and no "
                              f"{ENTRY_POINT_GROUP!r} entry point is named {kind!r}.",
                              hint="Pass --handler module:function; the built-in kinds are "
                              f"{', '.join(sorted(BUILTIN))}.")
        spec = found[0].value
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"Handler {spec!r} is not of the form module:function.",
                          hint="For example --handler mypackage.tasks:evaluate.")
    if "" not in sys.path:  # a handler next to where the worker was started, as `python -m` finds it
        sys.path.insert(0, "")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(f"Cannot import handler module {module_name!r}: "
                          f"{type(exc).__name__}: {exc}.",
                          hint="Check the name and that the module is on PYTHONPATH.") from None
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ConfigError(f"Module {module_name!r} has no {attr!r} to run as a handler.",
                              hint="Name a function defined in that module.")
    if not callable(target):
        raise ConfigError(f"Handler {spec!r} is not callable.", hint="Name a function.")
    return target  # type: ignore[no-any-return]


def json_output(value: Any) -> Any:
    """The handler's result if it is JSON-serialisable; a TypeError otherwise."""
    json.dumps(value, allow_nan=False)
    return value
