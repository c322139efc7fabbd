"""`kafeed prepare --rules` on the real broker: one pass cleans, dedups, tokenizes and fans out."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafeed.config import ConnectionSettings
from kafeed.schema import decode_document, make_sample
from kafeed.schema.records_pb2 import TrainingSample
from tests.prepare_support import (
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    watermark_consumer,
)

RULES = """
[[rule]]
name = "code"                  # before english: code comments are English too
metadata = {{ kind = "code" }}
to = "{raw}.code"

[[rule]]
name = "english"
language = "en"
to = "{raw}.en"

[[rule]]
name = "german"
language = "de"
to = "drop"
"""

DE = "Der Hund ist nicht in dem Haus, und die Katze schläft auf dem Sofa, sagt die Frau"
FR = "Le chat est sur la table et il dort dans le salon avec les enfants de la maison"


def _corpus(english: int, german: int, french: int, *, seed: str) -> tuple[list[Any], dict[str, str]]:
    """Samples and where each must land: every third English one is code, German is dropped,
    French matches no rule (the DLQ)."""
    expected: dict[str, str] = {}
    records = []
    for i, text in enumerate(paragraphs(english, seed=seed)):
        kind = "code" if i % 3 == 0 else "prose"
        records.append((f"en{i}".encode(), make_sample(text, id=f"en{i}", metadata={"kind": kind})
                        .SerializeToString(), None))
        expected[f"en{i}"] = "code" if kind == "code" else "en"
    for lang, text, count, where in (("de", DE, german, "drop"), ("fr", FR, french, "dlq")):
        for i in range(count):
            records.append((f"{lang}{i}".encode(),
                            make_sample(f"{text} {i}.", id=f"{lang}{i}").SerializeToString(), None))
            expected[f"{lang}{i}"] = where
    return records, expected


def _routed(kafka: ConnectionSettings, raw: str, expected: dict[str, str]) -> Counter[str]:
    """How often each document is in the rule topics, each checked to be its first rule's."""
    seen: Counter[str] = Counter()
    for where in ("code", "en"):
        for m in read_topic(kafka, f"{raw}.{where}"):
            doc = decode_document(m.value())
            assert expected[doc.id] == where, f"{doc.id} landed in {where}, not {expected[doc.id]}"
            seen[doc.id] += 1
    return seen


@pytest.mark.parametrize("scope", ["global", "partition"])
def test_prepare_routes_each_document_to_its_first_rule_once(  # type: ignore[no-untyped-def]
        kafka: ConnectionSettings, make_topic, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, scope: str) -> None:
    from kafeed.cli.main import main
    from kafeed.signals import stop_request

    monkeypatch.setenv("KAFEED_HOME", str(tmp_path))
    raw = make_topic(partitions=3)
    records, expected = _corpus(30, 10, 10, seed="en")
    copies = [records[1], records[2]]  # duplicates: dropped by dedup before any rule sees them
    produce(kafka, raw, records + copies)
    rules = tmp_path / "routes.toml"
    rules.write_text(RULES.format(raw=raw))

    try:
        code = main(["prepare", "-b", kafka.bootstrap, "-i", raw, "-g", f"g-{raw}", "--rules", str(rules),
                     "--dedup-scope", scope, "--batch-size", "20", "--until-caught-up", "--json"])
    finally:
        stop_request().uninstall()
        stop_request().reset()
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    stats = json.loads(captured.out)
    assert stats["balanced"] and stats["duplicates"] == 2
    assert stats["by_rule"] == {"code": 10, "english": 20, "german": 10}
    assert stats["dropped"] == 10 and stats["dead_letter_kinds"] == {"unrouted": 10}
    outputs = {t: n for t, n in stats["records_out"].items() if not t.startswith("__kafeed")}
    assert outputs == {f"{raw}.code": 10, f"{raw}.en": 20}  # and nothing to --output's "tokens"

    seen = _routed(kafka, raw, expected)
    for m in read_topic(kafka, f"{raw}.dlq"):
        headers = dict(m.headers())
        assert headers["kafeed.error.kind"] == b"unrouted"
        assert headers["kafeed.error.reason"] == b"no rule matched and there is no default topic"
        seen[TrainingSample.FromString(m.value()).id] += 1  # global dedup re-keys by content hash
    assert seen == Counter(k for k, w in expected.items() if w != "drop"), "a document is missing or doubled"


def test_prepare_rules_stay_exactly_once_when_the_worker_is_sigkilled(  # type: ignore[no-untyped-def]
        kafka: ConnectionSettings, make_topic, tmp_path: Path) -> None:
    """SIGKILL mid-run, then a rerun to the end: every document once, in its first rule's topic."""
    raw = make_topic(partitions=3)
    records, expected = _corpus(300, 30, 0, seed="kill")
    random.Random(5).shuffle(records)
    produce(kafka, raw, records)
    rules = tmp_path / "routes.toml"
    rules.write_text(RULES.format(raw=raw))
    env = prepare_env(str(tmp_path))
    base = prepare_command(kafka.bootstrap, raw, f"{raw}.tokens", f"g-{raw}", "--rules", str(rules),
                           "--batch-size", "20")

    proc = subprocess.Popen(base, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    watch = watermark_consumer(kafka)  # one client for every check: the kill follows at once
    try:
        while high_watermarks(kafka, f"{raw}.en", watch) < 20:  # part of the output is committed
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "no output within 120 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # before the close: a consumer's close can take seconds
    finally:
        watch.close()
    proc.wait()
    if proc.stderr:
        proc.stderr.close()
    # killed mid-run: fewer than the 200 English documents (the offsets count commit markers too)
    assert high_watermarks(kafka, f"{raw}.en") < 200
    rerun = subprocess.run([*base, "--until-caught-up", "--json"], env=env, capture_output=True, text=True,
                           timeout=180)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert json.loads(rerun.stdout)["balanced"]

    seen = _routed(kafka, raw, expected)
    assert seen == Counter(k for k, w in expected.items() if w != "drop"), "a document is missing or doubled"
