"""A process's descendants from /proc, and a bounded wait for processes to be gone.

Collect a tree *before* killing its root: once the root dies, its children are re-parented
(to init or a subreaper) and no longer lead back to it. A zombie counts as gone: it runs
nothing and waits only for its new parent to reap it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name, or None when there is none."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (not a zombie)."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process now running."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := proc_stat(int(entry))) is not None:
            out[int(entry)] = int(fields[1])
    return out


def descendants(pid: int) -> set[int]:
    """Every running process below ``pid`` (children, their children, ...), not ``pid`` itself."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {p for p in found if alive(p)}


def wait_gone(pids: set[int] | list[int], timeout_s: float) -> set[int]:
    """Wait up to ``timeout_s`` for every pid in ``pids`` to be gone; the survivors."""
    deadline = time.monotonic() + timeout_s
    left = {p for p in pids if alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left


def describe(pids: set[int]) -> str:
    """``pid: command line`` per pid, for a failure message."""
    lines = []
    for pid in sorted(pids):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmd = "?"
        lines.append(f"{pid}: {cmd[:200]}")
    return "; ".join(lines)


#: How long a tree may outlive its killed root: the loader's watch thread looks twice a second,
#: the rest is the kernel's parent-death signal and the processes' exit.
GONE_WITHIN_S = 15.0


def kill_root_and_check(proc: subprocess.Popen[Any], tree: set[int], what: str, *,
                        within_s: float = GONE_WITHIN_S) -> None:
    """SIGKILL ``proc``; every process of ``tree`` (grown in place by what started below a known
    one meanwhile) must be gone within ``within_s``."""
    os.kill(proc.pid, signal.SIGKILL)
    for pid in list(tree):
        tree |= descendants(pid)
    assert proc.wait(30) == -signal.SIGKILL
    left = wait_gone(tree, within_s)
    assert not left, f"alive {within_s:.0f} s after {what} was killed: {describe(left)}"


def reap(proc: subprocess.Popen[Any], tree: set[int]) -> None:
    """After a test, pass or fail: nothing of ``proc`` or ``tree`` left running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)
    for pid in wait_gone(tree, 0):
        os.kill(pid, signal.SIGKILL)
