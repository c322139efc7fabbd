"""`kafeed route --workers auto`: a backlog grows the group, a drained one shrinks it, exactly once.

The supervisor is shared by route, prepare and infer (tests/integration/test_infer_workers.py).
The default run has one short supervisor run (a small backlog, the policy's window cut
to a fraction of a second); the command-line runs at the default pace are slow-marked.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.scale import ScaleSettings, Supervisor
from kafeed.schema import make_sample
from kafeed.topics import plan_topic
from tests.prepare_support import prepare_env, produce, read_topic


def _lines(stream: object, into: queue.Queue[str]) -> None:
    for line in stream:  # type: ignore[attr-defined]
        into.put(line)


def _wait_for(lines: queue.Queue[str], words: str, deadline: float, seen: list[str]) -> None:
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(line)
        if words in line:
            return
    raise AssertionError(f"no {words!r} line; got:\n{''.join(seen[-40:])}")


@pytest.mark.slow  # three processes and two rebalances: ~60 s on a loaded 2-core machine
def test_workers_follow_the_backlog(kafka: ConnectionSettings, make_topic, admin,  # type: ignore[no-untyped-def]
                                    tmp_path: Path) -> None:
    source = make_topic(partitions=2)
    output = f"{source}.all"
    admin.create(plan_topic(output, brokers=1, partitions=2))
    rules = tmp_path / "routes.toml"
    rules.write_text(f'[[rule]]\nname = "all"\nto = "{output}"\n')
    cmd = [sys.executable, "-m", "kafeed.cli.main", "route", "-b", kafka.bootstrap, "--input", source,
           "--rules", str(rules), "--group", f"g-{source}", "--batch-size", "20",
           "--workers", "auto", "--min-workers", "1", "--max-workers", "2", "--scale-cooldown", "2"]
    proc = subprocess.Popen(cmd, env=prepare_env(str(tmp_path)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True)
    reader.start()
    seen: list[str] = []
    produced = 0
    try:
        _wait_for(lines, "0 -> 1 workers", time.monotonic() + 60, seen)
        # A backlog that keeps arriving: the lag does not come down under one worker.
        deadline = time.monotonic() + 120
        while not any("1 -> 2 workers" in s for s in seen):
            assert time.monotonic() < deadline and produced < 40_000, "".join(seen[-40:])
            batch = [(f"k{i}".encode(), make_sample(f"text {i}", id=f"k{i}").SerializeToString(), None)
                     for i in range(produced, produced + 400)]
            produced += produce(kafka, source, batch)
            while not lines.empty():
                seen.append(lines.get())
            time.sleep(0.2)
        _wait_for(lines, "2 -> 1 workers", time.monotonic() + 180, seen)  # drained: back to one
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
        reader.join(timeout=10)
        assert proc.stderr is not None
        proc.stderr.close()
    while not lines.empty():
        seen.append(lines.get())
    assert any("1 -> 2 workers" in s for s in seen) and any("2 -> 1 workers" in s for s in seen)
    assert rc == 143, "".join(seen[-40:])
    keys = Counter(m.key().decode() for m in read_topic(kafka, output))
    assert keys == Counter(f"k{i}" for i in range(produced)), "a record is missing or doubled"


def test_supervisor_grows_on_a_backlog_and_routes_it_once(kafka: ConnectionSettings, make_topic,  # type: ignore[no-untyped-def]
                                                          admin, tmp_path: Path) -> None:
    # The readings every 0.2 s and a window of two put the first decision 0.4 s after the
    # first worker was started, before it can have committed (it is still importing): the
    # lag of the backlog is not coming down there, on any machine, so the group grows.
    # A drained backlog then shrinks it, and at one worker the supervisor ends by itself.
    source = make_topic(partitions=2)
    output = f"{source}.all"
    admin.create(plan_topic(output, brokers=1, partitions=2))
    rules = tmp_path / "routes.toml"
    rules.write_text(f'[[rule]]\nname = "all"\nto = "{output}"\n')
    n = 600
    produce(kafka, source, [(f"k{i}".encode(), make_sample(f"text {i}", id=f"k{i}").SerializeToString(), None)
                            for i in range(n)])
    group = f"g-{source}"
    worker = [sys.executable, "-m", "kafeed.cli.main", "route", "-b", kafka.bootstrap, "--input", source,
              "--rules", str(rules), "--group", group, "--batch-size", "10", "--workers", "1"]
    said: list[str] = []
    supervisor = Supervisor(worker, topic=source, group=group, connection=kafka, say=said.append,
                            env=prepare_env(str(tmp_path)),
                            settings=ScaleSettings(min_workers=1, max_workers=2, interval_s=0.2, window=2,
                                                   cooldown_s=0.5, drain_target_s=1.0))
    stop = threading.Event()
    give_up = threading.Timer(180, stop.set)  # only if it never drains; the asserts then say why
    give_up.start()
    try:
        peak = supervisor.run(stop, until_caught_up=True)
    finally:
        give_up.cancel()
    assert not stop.is_set(), said
    sizes = [(a, b) for a, b, _ in supervisor.changes]
    assert peak == 2 and sizes == [(0, 1), (1, 2), (2, 1)], said
    assert "not coming down" in supervisor.changes[1][2] or "to drain" in supervisor.changes[1][2], said
    keys = Counter(m.key().decode() for m in read_topic(kafka, output))
    assert keys == Counter(f"k{i}" for i in range(n)), "a record is missing or doubled"
