"""What the secured-cluster tests search for (every secret of a cluster) and where (command lines)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from kafeed.broker import LocalCluster


def secrets(cluster: LocalCluster) -> list[str]:
    """Every role's password and the nodes' key password."""
    files = sorted((cluster.data_dir / "secure" / "clients").glob("*.toml"))
    found = [tomllib.loads(f.read_text())["connection"]["sasl_password"] for f in files]
    return [*found, cluster.material.key_password()]


def leaked(cluster: LocalCluster, haystack: list[str]) -> list[str]:
    """The secrets (shortened to 4 characters, so a failure does not print them) found in ``haystack``."""
    return [s[:4] + "..." for s in secrets(cluster) if any(s in text for text in haystack)]


def _cmdline(pid: int | str) -> str:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return raw.replace(b"\0", b" ").decode(errors="replace")


def command_lines() -> str:
    """The command line of every process on the machine, one a line."""
    lines = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            lines.append(_cmdline(pid))
        except OSError:
            pass
    return "\n".join(lines)


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


def process_tree(pid: int) -> dict[int, str]:
    """``pid`` and all its descendants still running: their command lines by pid (zombies left out)."""
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            line = _cmdline(current)
            todo += _children(current)
        except OSError:
            continue  # exited meanwhile
        if line:  # a zombie's is empty
            found[current] = line
    return found
