"""A second stage on the exactly-once core: SIGKILLed at random points, every input lands once."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from tests.prepare_support import prepare_env, produce, read_topic


def _router(kafka: ConnectionSettings, *topics: str, until_caught_up: bool = False) -> list[str]:
    return [sys.executable, "-m", "tests.integration.stream_router", kafka.bootstrap, *topics,
            *(["--until-caught-up"] if until_caught_up else [])]


@pytest.mark.parametrize("kills", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_router_is_exactly_once_under_kills(kafka: ConnectionSettings, make_topic, tmp_path: Path,  # type: ignore[no-untyped-def]
                                            kills: int) -> None:
    rng = random.Random(7)
    source = make_topic(partitions=3)
    out_a, out_b, group = f"{source}.a", f"{source}.b", f"g-{source}"
    routes = [b"a", b"b", b"a", b"b", None]  # every fifth record has no route: a dead letter
    records = []
    for i in range(2000):
        route = routes[i % len(routes)]
        records.append((f"k{i}".encode(), f"v{i}".encode(), [("route", route)] if route else None))
    produce(kafka, source, records)
    env = prepare_env(str(tmp_path))
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + ":" + env["PYTHONPATH"]
    cmd = _router(kafka, source, out_a, out_b, group)

    for _ in range(kills):
        # Kill after a random number of commits, i.e. somewhere inside the next batch.
        wanted = rng.randint(1, 6)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        commits = 0
        for line in proc.stdout:
            if line.startswith("committed "):
                commits += 1
                if commits >= wanted:
                    break
        assert commits >= wanted, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()

    done = subprocess.run(_router(kafka, source, out_a, out_b, group, until_caught_up=True), env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    json.loads(done.stdout.splitlines()[-1])

    seen: Counter[str] = Counter()
    for topic, route in ((out_a, b"a"), (out_b, b"b")):
        for m in read_topic(kafka, topic):
            assert dict(m.headers() or [])["route"] == route
            seen[m.value().decode()] += 1
    dlq = read_topic(kafka, f"{source}.dlq")
    for m in dlq:
        headers = dict(m.headers())
        assert headers["kafeed.error.kind"] == b"unroutable" and headers["kafeed.error.stage"] == b"route"
        assert headers["kafeed.source.topic"] == source.encode()
        seen[m.value().decode()] += 1
    assert len(dlq) == 400
    assert seen == Counter(f"v{i}" for i in range(2000)), "an input is missing or doubled"
