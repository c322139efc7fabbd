"""Whole processes: SIGKILL at random steps and resume; bounded DDP (gloo) without hangs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import kafeed
from kafeed.broker import free_port_block
from kafeed.config import ConnectionSettings
from tests.integration.loader_data import counts, produce_docs
from tests.kafka_fixtures import TopicFactory

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "integration" / "loader_trainer.py"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _cmd(kafka: ConnectionSettings, topic: str, ckpt: Path, size: int, *extra: str) -> list[str]:
    return [sys.executable, str(SCRIPT), "--bootstrap", kafka.bootstrap, "--topic", topic,
            "--checkpoint", str(ckpt), "--size", str(size), *extra]


@pytest.mark.parametrize(("attempts", "min_kills"), [(2, 1), pytest.param(4, 3, marks=pytest.mark.slow)])
def test_sigkill_at_random_steps_then_resume_consumes_every_record_once(
    kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, attempts: int, min_kills: int
) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 2500, seed=21)
    ckpt = tmp_path / "ckpt.json"
    cmd = _cmd(kafka, topic, ckpt, len(expected),
               "--workers", "2", "--shuffle", "30", "--step-sleep", "0.004")
    rng = random.Random(5)
    kills = 0
    steps_at_kill = []
    for _ in range(attempts):
        proc = subprocess.Popen(cmd, env=_env())
        before = json.loads(ckpt.read_text())["steps"] if ckpt.exists() else 0
        deadline = time.monotonic() + 60
        target = before + rng.randint(5, 150)
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if json.loads(ckpt.read_text())["steps"] >= target:
                    break
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                pass
            time.sleep(0.02)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait(30)
        # A kill before the first checkpoint (a slow start under load) leaves none yet.
        steps_at_kill.append(json.loads(ckpt.read_text())["steps"] if ckpt.exists() else 0)
    assert kills >= min_kills, steps_at_kill
    subprocess.run(cmd, env=_env(), check=True, timeout=240)
    final = json.loads(ckpt.read_text())
    assert final["done"]
    seen = np.asarray(final["seen"])
    seen[0] = 0
    assert np.array_equal(seen, expected), f"kills at steps {steps_at_kill}"


def test_sigkill_of_a_loop_that_only_reads_then_resume_consumes_every_record_once(
    kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path
) -> None:
    """No step time and a checkpoint every 20 batches: the loop builds its own batches (no
    prefetch thread, kafeed.loader.workers.prefetch) when it is killed."""
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 20000, seed=22)
    ckpt = tmp_path / "ckpt.json"
    cmd = _cmd(kafka, topic, ckpt, len(expected), "--shuffle", "30", "--checkpoint-every", "20")
    proc = subprocess.Popen(cmd, env=_env())
    seen_inline = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            state = json.loads(ckpt.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            time.sleep(0.005)
            continue
        if state["prefetch_threads"] == 0 and state["steps"] >= 100:
            seen_inline = True
            os.kill(proc.pid, signal.SIGKILL)  # mid-read, somewhere between two checkpoints
            break
        time.sleep(0.005)
    proc.wait(30)
    assert seen_inline and proc.returncode == -signal.SIGKILL
    killed_at = json.loads(ckpt.read_text())["steps"]
    subprocess.run(cmd, env=_env(), check=True, timeout=240)
    final = json.loads(ckpt.read_text())
    assert final["done"] and final["steps"] > killed_at
    seen = np.asarray(final["seen"])
    seen[0] = 0
    assert np.array_equal(seen, expected), f"killed after step {killed_at}"


def test_bounded_ddp_gloo_ends_on_every_rank_and_stays_exact(
    kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path
) -> None:
    topic = make_topic(partitions=3)  # rank 0 owns two partitions, rank 1 one: uneven on purpose
    expected = produce_docs(kafka.bootstrap, topic, 400, seed=4)
    ckpt = tmp_path / "ddp"
    port = str(free_port_block(1))
    procs = [
        subprocess.Popen(_cmd(kafka, topic, ckpt, len(expected), "--ddp"),
                         env=_env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
        for r in range(2)
    ]
    for proc in procs:
        assert proc.wait(180) == 0
    results = [json.loads((tmp_path / f"ddp.rank{r}").read_text()) for r in range(2)]
    assert results[0]["batches"] == results[1]["batches"] > 0
    merged = results[0]["merged"]
    assert merged == results[1]["merged"]
    # What the ranks did not agree to deliver is still there: read it without DDP.
    rest = kafeed.StreamLoader(kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka),
                               batch_size=4)
    rest.load_state_dict(merged)
    seen = np.asarray(results[0]["seen"]) + np.asarray(results[1]["seen"])
    seen[0] = 0
    remaining = counts(list(rest), len(expected))
    assert remaining.sum() > 0
    assert np.array_equal(seen + remaining, expected)
