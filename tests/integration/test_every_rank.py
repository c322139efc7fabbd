"""Every rank's loader state in every checkpoint, in every path that trains on kafeed's loader:
jobs of two processes (torchrun, Lightning's DDP launcher) against the real broker, cut short and
resumed, compared batch for batch with what each rank of an uninterrupted job reads.

The jobs themselves are tests/integration/ranks_job.py. The longer runs (four ranks, elastic
resumes, a rank SIGKILLed, uneven ranks, two nodes) are in test_every_rank_slow.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kafeed
from kafeed.config import ConnectionSettings
from tests.integration.loader_data import produce_docs
from tests.integration.ranks_job import BATCH, SEQ_LEN
from tests.kafka_fixtures import TopicFactory

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")


def job_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}  # see kafeed.train.distributed.check_restarts


def torchrun(job: dict[str, Any], *, nproc: int = 2, max_restarts: int = 0, timeout: float = 240,
             extra: tuple[str, ...] = ("--standalone",)) -> subprocess.CompletedProcess[str]:
    """``torchrun ... -m tests.integration.ranks_job JOB``, its output kept."""
    return subprocess.run(
        [str(TORCHRUN), *extra, "--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts),
         "-m", "tests.integration.ranks_job", json.dumps(job)],
        capture_output=True, text=True, timeout=timeout, env=job_env(), cwd=ROOT)


def launch(job: dict[str, Any], *, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``python -m tests.integration.ranks_job JOB``: Lightning starts the other ranks itself."""
    return subprocess.run([sys.executable, "-m", "tests.integration.ranks_job", json.dumps(job)],
                          capture_output=True, text=True, timeout=timeout, env=job_env(), cwd=ROOT)


def seen(out: Path, rank: int, attempt: int = 0) -> list[list[list[int]]]:
    """The windows rank ``rank`` trained on in attempt ``attempt``, batch by batch."""
    path = out / f"seen-r{rank}-a{attempt}.json"
    return json.loads(path.read_text()) if path.exists() else []


def uninterrupted(kafka: ConnectionSettings, topic: str, rank: int, world: int, count: int) -> list[Any]:
    """The first ``count`` batches that rank ``rank`` of a job of ``world`` ranks reads."""
    dataset = kafeed.KafkaTokenDataset(topic, seq_len=SEQ_LEN, eos_id=0, connection=kafka, shuffle_buffer=16,
                                       seed=3, rank=rank, world_size=world)
    batches = []
    for batch in kafeed.StreamLoader(dataset, batch_size=BATCH):
        batches.append(batch["tokens"].tolist())
        if len(batches) == count:
            break
    return batches


def job(kafka: ConnectionSettings, topic: str, out: Path, path: str, **kw: Any) -> dict[str, Any]:
    return {"path": path, "bootstrap": kafka.bootstrap, "topic": topic, "out": str(out), "steps": 6,
            "save_every": 2, "resume": False, **kw}


def check_lineage_names_every_rank(checkpoint: Path, world: int, topic: str, partitions: int) -> None:
    proc = subprocess.run([sys.executable, "-m", "kafeed.cli.main", "lineage", str(checkpoint), "--json"],
                          capture_output=True, text=True, timeout=120, env=job_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads(proc.stdout)
    assert [r["rank"] for r in info["ranks"]] == list(range(world))
    owned = sorted(key for r in info["ranks"] for key in r["partitions"])
    assert owned == [f"{topic}:{p}" for p in range(partitions)]  # every partition, one rank each


def test_a_trainer_of_two_ranks_restarted_by_torchrun_trains_the_batches_of_an_uninterrupted_job(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    from kafeed.integrations.hf import STATE_FILE

    topic = make_topic(partitions=3)
    produce_docs(kafka.bootstrap, topic, 300)
    # Both ranks fail as step 6 begins, after checkpoint-4; torchrun starts them again and they
    # resume from checkpoint-4, so steps 5 and 6 are trained again from the same batches.
    proc = torchrun(job(kafka, topic, tmp_path, "hf", crash={"step": 5, "rank": "all", "how": "raise"}),
                    max_restarts=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        first, rest = seen(tmp_path, rank, 0), seen(tmp_path, rank, 1)
        assert len(first) == 5 and len(rest) == 2
        assert first[:4] + rest == uninterrupted(kafka, topic, rank, 2, 6)
    doc = json.loads((tmp_path / "ckpt" / "checkpoint-6" / STATE_FILE).read_text())
    assert doc["step"] == 6 and doc["loader"]["world_size"] == 2 and len(doc["loader"]["ranks"]) == 2
    check_lineage_names_every_rank(tmp_path / "ckpt" / "checkpoint-6", 2, topic, 3)


def test_a_lightning_fit_on_two_devices_resumes_with_the_batches_of_an_uninterrupted_job(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=3)
    produce_docs(kafka.bootstrap, topic, 300)
    cut = launch(job(kafka, topic, tmp_path, "lightning", devices=2,
                     crash={"step": 5, "rank": "all", "how": "raise"}))
    assert cut.returncode != 0 and "Crash" in cut.stderr, cut.stderr[-3000:]
    first = [seen(tmp_path, rank) for rank in (0, 1)]
    for name in os.listdir(tmp_path):  # the resumed job writes its own record of what it trained
        if name.startswith("seen-"):
            os.rename(tmp_path / name, tmp_path / f"cut-{name}")
    done = launch(job(kafka, topic, tmp_path, "lightning", devices=2, resume=True))
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in (0, 1):
        assert len(first[rank]) == 5
        assert first[rank][:4] + seen(tmp_path, rank) == uninterrupted(kafka, topic, rank, 2, 6)
    check_lineage_names_every_rank(tmp_path / "ckpt" / "epoch=0-step=6.ckpt", 2, topic, 3)


@pytest.mark.parametrize("path", ["own"])
def test_kafeeds_own_loop_of_two_ranks_restarted_by_torchrun_resumes_exactly(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, path: str) -> None:
    topic = make_topic(partitions=3)
    produce_docs(kafka.bootstrap, topic, 300)
    proc = torchrun(job(kafka, topic, tmp_path, path, crash={"step": 5, "rank": 1, "how": "kill"}),
                    max_restarts=1)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        rest = seen(tmp_path, rank, 1)
        assert len(rest) == 2
        assert seen(tmp_path, rank, 0)[:4] + rest == uninterrupted(kafka, topic, rank, 2, 6)


def test_a_trainer_that_sees_one_process_of_a_two_rank_job_is_refused(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    # On a machine without a GPU, transformers reports one process unless use_cpu=True, while
    # torchrun's process group joins two: each rank would train a model of its own.
    topic = make_topic(partitions=2)
    proc = torchrun(job(kafka, topic, tmp_path, "hf", use_cpu=False))
    assert proc.returncode != 0
    assert "torch.distributed runs 2 processes, but the Trainer sees 1" in proc.stderr
    assert not list(tmp_path.glob("seen-*")) and not list(tmp_path.glob("ckpt/checkpoint-*"))
