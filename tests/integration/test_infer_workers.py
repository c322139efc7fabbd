"""`kafeed infer --workers auto`: a backlog grows the group, a drained one shrinks it, one prediction each."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from tests.integration.process_output import StderrLines
from tests.integration.train_data import paragraphs, produce_labelled, tiny_classifier
from tests.prepare_support import prepare_env, read_topic


@pytest.mark.slow  # two `kafeed infer` processes importing torch and ~3,000 forward passes: ~2 min loaded
@pytest.mark.timeout(900)
def test_infer_workers_follow_the_backlog(kafka: ConnectionSettings, make_topic, shakespeare: Path,  # type: ignore[no-untyped-def]
                                          tmp_path: Path) -> None:
    corpus = paragraphs(shakespeare)
    ck = tiny_classifier(kafka, make_topic(partitions=2), corpus[:100], tmp_path / "ck")
    source = make_topic(partitions=2)
    output = f"{source}.pred"
    cmd = [sys.executable, "-m", "kafeed.cli.main", "infer", "-b", kafka.bootstrap, "--checkpoint", str(ck),
           "--input", source, "--output", output, "--group", f"g-{source}",
           # A transaction of 1,024 forward passes takes seconds on any CPU, so the committed
           # offsets stand still for the supervisor's five readings (one a second) while the
           # first worker imports torch and works off its first batch: the lag is not coming down.
           "--batch-size", "1024", "--max-wait-ms", "1000",
           "--workers", "auto", "--min-workers", "1", "--max-workers", "2", "--scale-cooldown", "2"]
    proc = subprocess.Popen(cmd, env=prepare_env(str(tmp_path)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    lines = StderrLines(proc)
    n = 3072
    try:
        lines.wait_for("0 -> 1 workers", timeout=120)
        # The backlog arrives while the first worker starts; never more workers than partitions.
        produce_labelled(kafka, source, [corpus[100 + i % 2000] for i in range(n)], [0] * n, partitions=2)
        lines.wait_for("1 -> 2 workers", timeout=300)
        lines.wait_for("2 -> 1 workers", timeout=600)  # drained: back to one
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
    rc = proc.wait()
    said = lines.close()
    assert rc == 143, said[-3000:]
    assert "2 -> 3" not in said and "worker exited" not in said, said[-3000:]
    ids = Counter(json.loads(m.value())["id"] for m in read_topic(kafka, output))
    assert ids == Counter(f"s-{i}" for i in range(n)), "a prediction is missing or doubled"
