"""`kafeed prepare` SIGKILLed at random points and restarted: still exactly once, dedup remembers."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from tests.prepare_support import (
    document_ids,
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    sample_record,
)


def _kill_and_restart(kafka: ConnectionSettings, make_topic, tmp_path: Path, kills: int,  # type: ignore[no-untyped-def]
                      n_docs: int) -> None:
    rng = random.Random(kills)
    raw = make_topic(partitions=3)
    good = paragraphs(n_docs)
    dups = [sample_record(t) for t in good[::7]]
    records = [sample_record(t) for t in good] + dups
    rng.shuffle(records)
    produce(kafka, raw, records)
    output, group = f"{raw}.tokens", f"g-{raw}"
    env = prepare_env(str(tmp_path))
    base = prepare_command(kafka.bootstrap, raw, output, group, "--batch-size", "20")

    for k in range(kills):
        # Kill once the committed-or-not output has grown past a random point of the run.
        target = int(n_docs * (k + rng.random()) / (kills + 1))
        proc = subprocess.Popen(base, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while high_watermarks(kafka, output) < target and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        time.sleep(rng.random() * 0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()

    done = subprocess.run([*base, "--until-caught-up", "--json"], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["balanced"]
    ids = document_ids(read_topic(kafka, output))
    assert len(ids) == len(set(ids)), "a document was written twice"
    assert len(ids) == n_docs

    # After all those restarts, dedup still remembers: old texts are dropped, a new one passes.
    produce(kafka, raw, [sample_record(t) for t in good[:10]]
            + [sample_record(paragraphs(1, seed="late")[0])])
    late = subprocess.run([*base, "--until-caught-up", "--json"], env=env, capture_output=True,
                          text=True, timeout=240)
    assert late.returncode == 0, late.stderr
    stats = json.loads(late.stdout)
    assert (stats["records_in"], stats["duplicates"], stats["documents_out"]) == (11, 10, 1)
    assert len(read_topic(kafka, output)) == n_docs + 1


# The default run kills prepare in tests/faults/test_prepare_global_kill.py (two workers,
# global dedup); this one-worker run of the same kind is kept for -m slow.
@pytest.mark.slow
def test_prepare_survives_kills(kafka: ConnectionSettings, make_topic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _kill_and_restart(kafka, make_topic, tmp_path, kills=2, n_docs=1200)


@pytest.mark.slow
def test_prepare_survives_many_kills(kafka: ConnectionSettings, make_topic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _kill_and_restart(kafka, make_topic, tmp_path, kills=10, n_docs=6000)
