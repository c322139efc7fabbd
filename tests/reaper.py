"""Nothing a test session starts outlives it, even when the session is killed.

Local clusters run in sessions of their own so that ``kafeed broker start`` outlives its
command, and a SIGKILLed pytest (a CI timeout, an operator's Ctrl-C twice) would leave their
JVMs running. A small watcher process holds a pipe from the session: when the pipe closes
(the session ended, however it ended) it kills every process whose command line names the
session's temporary directory (brokers, MirrorMaker, stage CLIs started by tests), sparing
the session and its ancestors (whose command line names it under ``--basetemp``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WATCH = """
import os, signal, sys

def parent(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])

spared, pid = {os.getpid()}, os.getpid()
while pid > 1:  # the session and whatever started it (their command lines may name the root)
    pid = parent(pid)
    spared.add(pid)
sys.stdin.buffer.read()  # returns when the session's end of the pipe closes
root = sys.argv[1].encode()
for entry in os.listdir("/proc"):
    if not entry.isdigit() or int(entry) in spared:
        continue
    try:
        with open(f"/proc/{entry}/cmdline", "rb") as f:
            if root in f.read():
                os.kill(int(entry), signal.SIGKILL)
    except OSError:
        pass
"""


def start_reaper(root: Path) -> subprocess.Popen[bytes] | None:
    """A watcher that kills what names ``root`` once this process ends (Linux; None elsewhere)."""
    if not os.path.isdir("/proc"):
        return None
    return subprocess.Popen([sys.executable, "-c", WATCH, str(root)], stdin=subprocess.PIPE,
                            start_new_session=True)


def stop_reaper(reaper: subprocess.Popen[bytes] | None) -> None:
    """End of session: close the pipe and let the watcher sweep once."""
    if reaper is None:
        return
    assert reaper.stdin is not None
    reaper.stdin.close()
    reaper.wait(30)
