"""Handlers the task-queue tests run in worker processes: light (no torch), logging each run.

Every run appends ``start``/``done``/``fail`` lines (key, pid, time) to ``params["log"]``
with O_APPEND, so the test can count runs per key and check that none overlapped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def _log(path: str, event: str, key: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{event} {key} {os.getpid()} {time.time():.6f}\n".encode())
    finally:
        os.close(fd)


def runs(path: Path) -> list[tuple[str, str, int, float]]:
    """(event, key, pid, time) per line of a run log."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        event, key, pid, at = line.split()
        out.append((event, key, int(pid), float(at)))
    return out


def mixed(params: dict[str, Any]) -> dict[str, Any]:
    """``mode``: ok, slow (sleeps ``seconds``), flaky (fails its first ``fails`` runs), fail."""
    key, log = params["key"], params["log"]
    _log(log, "start", key)
    mode = params.get("mode", "ok")
    if mode == "slow":
        time.sleep(float(params.get("seconds", 3.0)))
    if mode == "fail":
        _log(log, "fail", key)
        raise RuntimeError(f"{key} always fails")
    if mode == "flaky":
        earlier = sum(1 for event, k, _, _ in runs(Path(log)) if event == "start" and k == key) - 1
        if earlier < int(params.get("fails", 2)):
            _log(log, "fail", key)
            raise RuntimeError(f"{key} failed on run {earlier + 1}")
    _log(log, "done", key)
    return {"key": key, "pid": os.getpid()}


def noop(params: dict[str, Any]) -> None:
    """Does nothing: what the benchmark dispatches."""
    return None
