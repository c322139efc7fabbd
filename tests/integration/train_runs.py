"""`kafeed train` as a child process: its JSON summary, and a kill -9 between two checkpoints."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path


def finish(proc: subprocess.Popen[str], code: int = 0) -> dict[str, object]:
    """The run's ``--json`` summary, once it exited with ``code``."""
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == code, err[-3000:]
    summary: dict[str, object] = json.loads(out)
    return summary


def kill_after_checkpoint(proc: subprocess.Popen[str], ckpt: Path, step: int, every: int,
                          rng: random.Random) -> None:
    """kill -9 ``proc`` at a random moment once the checkpoint of ``step`` exists, and before the
    next one (``step + every``): a step takes a few ms here, and a run that reached its end first
    would not have been killed at all."""
    marker = ckpt / f"step-{step:08d}.json"
    following = ckpt / f"step-{step + every:08d}.json"
    deadline = time.monotonic() + 180
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    until = time.monotonic() + rng.uniform(0.0, 0.2)
    while time.monotonic() < until and not following.exists():
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
