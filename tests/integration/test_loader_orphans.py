"""A trainer killed with SIGKILL leaves no loader worker behind (and no open stdout), and,
killed while its workers start, no process of its tree at all (forkserver, workers,
resource tracker)."""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import numpy as np
import pytest

from kafeed.config import ConnectionSettings
from kafeed.schema import make_document
from tests.integration.loader_data import producer
from tests.kafka_fixtures import TopicFactory
from tests.process_tree import alive, descendants, describe, kill_root_and_check, proc_stat, reap

ROOT = Path(__file__).resolve().parents[2]
DOCS = 20  # per partition; 15 tokens + EOS = one 16-token window (seq_len 15) each


def _produce_whole_batches(bootstrap: str, topic: str) -> int:
    """DOCS documents into each of 2 partitions, so that each worker's reader yields exactly
    DOCS / 2 full batches of 2 and keeps nothing back; returns the batches in all."""
    p = producer(bootstrap)
    for partition in range(2):
        for i in range(DOCS):
            doc = make_document(np.full(15, i + 1), id=f"d-{partition}-{i}", vocab_size=65536)
            p.produce(topic, value=doc.SerializeToString(), partition=partition)
    assert p.flush(30) == 0
    return DOCS
SCRIPT = ROOT / "tests" / "integration" / "loader_orphan.py"


def _lines(stream: IO[str]) -> queue.Queue[str | None]:
    """The stream's lines as they come; None at EOF."""
    out: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            out.put(line)
        out.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return out


def _until(cond: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(cond())  # type: ignore[operator]


@pytest.mark.parametrize("stall", [False, True], ids=["waiting-on-kafka", "blocked-on-queue"])
def test_workers_exit_when_the_trainer_is_sigkilled(
    kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, stall: bool
) -> None:
    topic = make_topic(partitions=2)
    batches = _produce_whole_batches(kafka.bootstrap, topic)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, str(SCRIPT), "--bootstrap", kafka.bootstrap, "--topic", topic,
           "--batches", str(batches)]
    with (tmp_path / "stderr").open("w") as err:
        proc = subprocess.Popen([*cmd, *(["--stall"] if stall else [])], stdout=subprocess.PIPE,
                                stderr=err, text=True, env=env)
    assert proc.stdout is not None
    lines = _lines(proc.stdout)
    pids: list[int] = []
    try:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            line = None
        assert line and line.startswith("READY"), (tmp_path / "stderr").read_text()[-2000:]
        pids = [int(p) for p in line.split()[1:]]
        assert len(pids) == 2 and all(alive(p) for p in pids)
        if not stall:  # every batch handed out: both workers now wait on Kafka
            try:
                assert lines.get(timeout=60) == "CAUGHT-UP\n"
            except queue.Empty:
                pytest.fail("the trainer never received every batch")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        assert _until(lambda: not any(alive(p) for p in pids), 10), \
            f"workers still alive 10 s after the trainer died: {[p for p in pids if alive(p)]}"
        # Nothing holds the trainer's stdout open any more.
        try:
            assert lines.get(timeout=10) is None
        except queue.Empty:
            pytest.fail("the trainer's stdout never reached EOF")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.stdout.close()




def _kill_during_startup(kafka: ConnectionSettings, topic: str, tmp_path: Path,
                         ready: object, context: str | None = None) -> None:
    """Start the trainer with --startup, SIGKILL it once ``ready(tree)`` holds for the
    processes below it, and require every process of its tree to be gone soon after."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, str(SCRIPT), "--bootstrap", kafka.bootstrap, "--topic", topic, "--startup",
           *(["--context", context] if context else [])]
    with (tmp_path / "stderr").open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    assert proc.stdout is not None
    lines = _lines(proc.stdout)
    tree: set[int] = set()
    try:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            line = None
        assert line == "STARTING\n", (tmp_path / "stderr").read_text()[-2000:]
        deadline = time.monotonic() + 120
        while not ready(tree):  # type: ignore[operator]
            assert proc.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
            assert time.monotonic() < deadline, f"the workers never started: {describe(tree)}"
            tree |= descendants(proc.pid)
        kill_root_and_check(proc, tree, "the trainer")
    finally:
        reap(proc, tree)
        proc.stdout.close()


def _workers(tree: set[int]) -> int:
    """DataLoader workers in ``tree``: not the forkserver nor the resource tracker. A forked
    worker runs the trainer's command line, a forkserver's worker the forkserver's, whose
    own parent (the trainer) runs neither multiprocessing command."""
    def cmdline(pid: int) -> bytes:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return b""

    count = 0
    for pid in tree:
        line = cmdline(pid)
        if b"resource_tracker" in line:
            continue
        if b"forkserver" in line:
            stat = proc_stat(pid)
            if stat is None or b"forkserver" not in cmdline(int(stat[1])):
                continue  # the forkserver itself
        count += 1
    return count


@pytest.mark.parametrize(("moment", "context"), [
    ("first-worker", None), ("first-worker", "forkserver"), ("random", None)])
def test_a_trainer_killed_while_workers_start_leaves_no_process(
    kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, moment: str, context: str | None
) -> None:
    """Forked workers (the default in a trainer with no Kafka client of its own) and a
    forkserver's alike."""
    topic = make_topic(partitions=2)
    _produce_whole_batches(kafka.bootstrap, topic)
    if moment == "first-worker":
        _kill_during_startup(kafka, topic, tmp_path, lambda tree: _workers(tree) >= 1, context)
        return
    after = time.monotonic() + random.uniform(0.0, 1.5)
    _kill_during_startup(kafka, topic, tmp_path, lambda tree: time.monotonic() >= after)


@pytest.mark.slow
def test_trainers_killed_at_random_moments_leave_no_process(
    kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    _produce_whole_batches(kafka.bootstrap, topic)
    for attempt in range(8):
        run = tmp_path / str(attempt)
        run.mkdir()
        workers = random.choice([0, 1, 2])
        delay = random.uniform(0.0, 2.0)
        started: list[float] = []

        def ready(tree: set[int], workers: int = workers, delay: float = delay,
                  started: list[float] = started) -> bool:
            if not started and _workers(tree) >= workers:
                started.append(time.monotonic())
            return bool(started) and time.monotonic() - started[0] >= delay

        _kill_during_startup(kafka, topic, run, ready)
