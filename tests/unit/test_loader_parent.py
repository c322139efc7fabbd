"""kafeed.loader.workers.parent without a loader: who counts as gone, and a watch that ends its process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kafeed.loader.workers.forkserver_guard import in_forkserver
from kafeed.loader.workers.parent import EXIT_PARENT_GONE, started

ROOT = Path(__file__).resolve().parents[2]
WATCHER = ("import sys, time; from kafeed.loader.workers.parent import watch_parent; "
           "watch_parent(int(sys.argv[1])); print('ARMED', flush=True); time.sleep(60)")


def _watcher(origin: int) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-c", WATCHER, str(origin)], stdout=subprocess.PIPE, text=True,
                            env=env)


def test_a_running_process_has_a_start_and_a_zombie_or_reaped_one_none() -> None:
    assert started(os.getpid()) is not None
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while started(child.pid) is not None:  # a zombie once it exits: not reaped yet
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert child.poll() == 0  # reaped now
    assert started(child.pid) is None


def test_a_watch_armed_after_its_origin_died_ends_the_process_at_once() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    watcher = _watcher(gone.pid)
    assert watcher.wait(30) == EXIT_PARENT_GONE
    assert watcher.stdout is not None and watcher.stdout.read() == ""
    watcher.stdout.close()


def test_a_watch_ends_the_process_soon_after_its_origin_dies() -> None:
    origin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    watcher = _watcher(origin.pid)
    try:
        assert watcher.stdout is not None and watcher.stdout.readline() == "ARMED\n"
        origin.kill()
        origin.wait()
        assert watcher.wait(10) == EXIT_PARENT_GONE  # looked at twice a second
    finally:
        for proc in (origin, watcher):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if watcher.stdout is not None:
            watcher.stdout.close()


def test_the_forkserver_guard_does_nothing_outside_a_forkserver() -> None:
    assert not in_forkserver()
