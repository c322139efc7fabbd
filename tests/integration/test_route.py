"""`kafeed route` on the real broker: overlapping rules, SIGKILLed; each record once, in its first match."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.schema import make_sample
from kafeed.topics import plan_topic
from tests.prepare_support import high_watermarks, prepare_env, produce, read_topic

RULES = """
default = "{src}.other"

[[rule]]
name = "code"                # overlaps wiki and english: wins because it comes first
regex = '^def \\w+\\('
to = "{src}.code"

[[rule]]
name = "wiki"
source = "wiki"
to = "{src}.wiki"

[[rule]]
name = "english"
language = "en"
to = "{src}.en"

[[rule]]
name = "noise"
max_length = 6
to = "drop"
"""

EN = "the river runs to the sea and it is cold in the morning"
DE = "der Fluss ist kalt und die Stadt ist nicht weit von dem Meer"


def _corpus(n: int) -> tuple[list[tuple[bytes, bytes, None]], dict[str, str]]:
    """Records and, by key, where each must land (topic suffix, "drop" or "dlq")."""
    records, expected = [], {}
    for i in range(n):
        key = f"k{i}"
        kind = i % 6
        if kind == 5:
            records.append((key.encode(), b"\x0a\xff\xff" + key.encode(), None))  # not a sample
            expected[key] = "dlq"
            continue
        source, text, where = {
            0: ("wiki", f"def f{i}(x): return the value of it", "code"),
            1: ("wiki", f"{EN} {i}", "wiki"),
            2: ("news", f"{EN} {i}", "en"),
            3: ("news", f"{DE} {i}", "other"),
            4: ("news", f"x{i % 1000}", "drop"),
        }[kind]
        records.append((key.encode(), make_sample(text, id=key, source=source).SerializeToString(), None))
        expected[key] = where
    return records, expected


def _command(kafka: ConnectionSettings, source: str, rules: Path, *extra: str,
             batching: tuple[str, ...] = ("--batch-size", "25")) -> list[str]:
    return [sys.executable, "-m", "kafeed.cli.main", "route", "-b", kafka.bootstrap, "--input", source,
            "--rules", str(rules), "--group", f"g-{source}", *batching, *extra]


# One transaction per consume call, and transactions gathered from many small consume calls.
ONE_POLL = ("--batch-size", "25")
MANY_POLLS = ("--batch-size", "150", "--poll-records", "10")


@pytest.mark.parametrize(("kills", "batching"), [
    (2, ONE_POLL), (2, MANY_POLLS), pytest.param(5, ONE_POLL, marks=pytest.mark.slow),
    pytest.param(5, MANY_POLLS, marks=pytest.mark.slow)])
def test_route_is_first_match_and_exactly_once_under_kills(kafka: ConnectionSettings, make_topic, admin,  # type: ignore[no-untyped-def]
                                                           tmp_path: Path, kills: int,
                                                           batching: tuple[str, ...]) -> None:
    rng = random.Random(kills)
    source = make_topic(partitions=3)
    outputs = {s: f"{source}.{s}" for s in ("code", "wiki", "en", "other")}
    for topic in outputs.values():
        admin.create(plan_topic(topic, brokers=1, partitions=3))
    rules = tmp_path / "routes.toml"
    rules.write_text(RULES.replace("{src}", source))
    n = 1200
    records, expected = _corpus(n)
    produce(kafka, source, records)
    env = prepare_env(str(tmp_path))
    routed_total = sum(1 for w in expected.values() if w in outputs)

    for k in range(kills):
        target = int(routed_total * (k + rng.random()) / (kills + 1))
        proc = subprocess.Popen(_command(kafka, source, rules, batching=batching), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while sum(high_watermarks(kafka, t) for t in outputs.values()) < target:
            alive = proc.poll() is None and time.monotonic() < deadline
            assert alive, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        time.sleep(rng.random() * 0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()

    done = subprocess.run(_command(kafka, source, rules, "--until-caught-up", "--json", batching=batching),
                          env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads(done.stdout)
    assert stats["balanced"] and set(stats["by_rule"]) == {"code", "wiki", "english", "noise", "default"}

    seen: Counter[str] = Counter()
    for where, topic in outputs.items():
        for m in read_topic(kafka, topic):
            key = m.key().decode()
            assert expected[key] == where, f"{key} landed in {where}, not {expected[key]}"
            seen[key] += 1
    for m in read_topic(kafka, f"{source}.dlq"):
        headers = dict(m.headers())
        assert headers["kafeed.error.kind"] == b"decode" and headers["kafeed.error.stage"] == b"route"
        seen[m.key().decode()] += 1
    assert seen == Counter(k for k, w in expected.items() if w != "drop"), "a record is missing or doubled"


def test_route_refuses_a_rule_whose_topic_is_missing(  # type: ignore[no-untyped-def]
        kafka: ConnectionSettings, make_topic, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kafeed.cli.main import main
    from kafeed.signals import stop_request

    source = make_topic(partitions=1)
    rules = tmp_path / "routes.toml"
    rules.write_text(f'[[rule]]\nname = "typo"\nto = "{source}.nope"\n')
    try:
        rc = main(["route", "-b", kafka.bootstrap, "--input", source, "--rules", str(rules)])
    finally:
        stop_request().uninstall()
        stop_request().reset()
    err = capsys.readouterr().err
    assert rc == 2 and "Rule 'typo' routes to topic" in err and "does not exist" in err, err
    assert "Traceback" not in err
