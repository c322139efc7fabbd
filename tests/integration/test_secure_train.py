"""Training on the secured cluster as the trainer role, in the processes a real run has:
`kafeed train --config trainer.toml` with DataLoader worker processes, and torchrun ranks.
Each reads through the role's settings file (SASL_SSL, SCRAM, the trainer's ACLs), trains,
checkpoints, and the trainer's password is nowhere in what it printed, the checkpoint files
it wrote, or the command lines of its processes.

The topic is the trainer's own (`secure-train-tokens`, granted with the trainer role's
bindings renamed to it), so these tests do not depend on what the pipeline test left in
`tokens`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.acl import AclAdmin, RoleNames, principal_for, role_bindings
from kafeed.broker import LocalCluster
from kafeed.loader.state.rank_states import loadable_state
from kafeed.topics import TopicAdmin, plan_topic
from kafeed.train.checkpoint import CheckpointManager
from tests.integration.process_output import StderrLines
from tests.integration.secure_support import leaked, process_tree
from tests.integration.train_data import paragraphs, produce_documents

TOPIC = "secure-train-tokens"
PARTITIONS = 4
# _train_cli's small settings in test_train.py, smaller still: the point is the processes.
TINY = ["--batch-size", "2", "--seq-len", "64", "--d-model", "32", "--n-layers", "1"]


@pytest.fixture(scope="module")
def trainer_topic(secure_cluster: LocalCluster, shakespeare: Path) -> str:
    """Byte-tokenized documents (as prepare writes them) the trainer role may read."""
    admin = secure_cluster.connection()
    TopicAdmin(admin).create(plan_topic(TOPIC, brokers=1, partitions=PARTITIONS))
    produce_documents(admin, TOPIC, paragraphs(shakespeare, limit=400), partitions=PARTITIONS)
    AclAdmin(admin).grant(role_bindings("trainer", principal_for("trainer"), RoleNames(tokens=TOPIC)))
    return TOPIC


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1", "OMP_NUM_THREADS": "1"}


def _files(directory: Path) -> list[str]:
    """Every file under ``directory`` as text (binary ones too: a pickled string shows as is)."""
    return [p.read_bytes().decode(errors="replace") for p in sorted(directory.rglob("*")) if p.is_file()]


def _readers(ckpt: Path) -> dict[str, list[str]]:
    latest = CheckpointManager(ckpt).load_latest()
    assert latest is not None
    readers = loadable_state(latest.manifest["loader"])["readers"]  # every rank's, merged
    return {name: sorted(r["reader"]["partitions"]) for name, r in readers.items()}


def test_dataloader_workers_train_as_trainer_and_leak_no_secret(
        secure_cluster: LocalCluster, trainer_topic: str, tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafeed.cli.main", "train", "--topic", trainer_topic, "--steps", "30",
         *TINY, "--num-workers", "2", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "10",
         "--log-every", "2", "--seed", "3",
         "--config", str(secure_cluster.client_file("trainer")), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    stderr = StderrLines(proc)
    stderr.wait_for("step ")  # batches are flowing: both workers are up and reading
    tree = process_tree(proc.pid)
    out, err = stderr.finish()
    # Before anything that prints stderr on failure.
    assert leaked(secure_cluster, [out, err, *tree.values()]) == []
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["steps"] == 30 and summary["checkpoint"] == str(ckpt / "step-00000030.pt")
    workers = [line for pid, line in tree.items() if pid != proc.pid]
    assert len(workers) >= 2, tree
    assert "--config" in tree[proc.pid] and "sasl" not in tree[proc.pid].lower()
    # Two readers, one per DataLoader worker, between them every partition.
    readers = _readers(ckpt)
    assert len(readers) == 2, readers
    assert sorted(k for keys in readers.values() for k in keys) == [
        f"{trainer_topic}:{p}" for p in range(PARTITIONS)]
    assert not any(word in err.lower() for word in ("denied", "authorization failed", "traceback")), err
    written = _files(ckpt)
    assert len(written) >= 6  # three checkpoints, each a .pt and its manifest
    assert leaked(secure_cluster, written) == []


class _Sampler:
    """The command lines of a process tree, sampled until the process exits (torchrun's ranks
    come and go on their own: there is no line to wait for that both ranks are alive)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self.proc.poll() is None and not self._stop.is_set():
            self.seen.update(process_tree(self.proc.pid))
            self._stop.wait(0.05)

    def close(self) -> dict[int, str]:
        self._stop.set()
        self._thread.join(timeout=30)
        return self.seen


@pytest.fixture
def sampled() -> Iterator[list[_Sampler]]:
    samplers: list[_Sampler] = []
    yield samplers
    for sampler in samplers:
        sampler.close()


# 12-30 s on the shared 2-core machine (torch imported three times): past the default run's budget.
@pytest.mark.slow
def test_torchrun_ranks_train_as_trainer_and_leak_no_secret(
        secure_cluster: LocalCluster, trainer_topic: str, tmp_path: Path,
        sampled: list[_Sampler]) -> None:
    ckpt = tmp_path / "ck"
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.Popen(
        [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "kafeed.cli.main", "train",
         "--topic", trainer_topic, "--steps", "8", *TINY, "--checkpoint-dir", str(ckpt),
         "--checkpoint-every", "4", "--log-every", "2",
         "--config", str(secure_cluster.client_file("trainer")), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    sampler = _Sampler(proc)
    sampled.append(sampler)
    out, err = proc.communicate(timeout=300)
    seen = sampler.close()
    # Before anything that prints stderr on failure.
    assert leaked(secure_cluster, [out, err, *seen.values()]) == []
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out)  # rank 0 alone prints the job's summary
    assert summary["steps"] == 8 and summary["tokens_trained"] == 8 * 2 * 2 * 64
    ranks = [line for pid, line in seen.items() if pid != proc.pid and "kafeed.cli.main" in line]
    assert len(ranks) >= 2, seen
    readers = _readers(ckpt)
    assert len(readers) == 2, readers
    assert sorted(k for keys in readers.values() for k in keys) == [
        f"{trainer_topic}:{p}" for p in range(PARTITIONS)]
    assert not any(word in err.lower() for word in ("denied", "authorization failed", "traceback")), err
    written = _files(ckpt)
    assert len(written) >= 4  # two checkpoints, each a .pt and its manifest
    assert leaked(secure_cluster, written) == []
