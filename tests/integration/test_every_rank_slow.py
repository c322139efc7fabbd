"""Every rank, every path, the long runs (``-m slow``): elastic resumes at another world size,
a rank SIGKILLed under ``torchrun --max-restarts 1``, ranks that run out unevenly, and two
nodes, each against the real broker.

Every record is counted by document: document N's tokens all equal N+1
(tests/integration/loader_data.py), so what each rank trained (``seen-r{rank}-a{attempt}.json``,
written by tests/integration/ranks_job.py) tells, per document, whether it was trained once,
twice or not at all. A bounded topic under torch.distributed stops every rank when one runs dry
(kafeed/loader/rank_sync.py), which leaves the other ranks' last records in the final state: each
job ends with a phase of one rank that trains to the topic's end, so that the whole job trains
every record once. Each test prints its counts (run with ``-s`` to see them).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from kafeed.config import ConnectionSettings
from kafeed.train.checkpoint import CheckpointManager
from tests.integration.loader_data import counts, produce_docs
from tests.integration.test_every_rank import ROOT, TORCHRUN, job, job_env, launch, torchrun
from tests.integration.train_data import paragraphs, produce_documents
from tests.kafka_fixtures import TopicFactory
from tests.process_tree import GONE_WITHIN_S, descendants, describe, wait_gone

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ALL = 10**6  # steps enough to train to a bounded topic's end
LAUNCH_S = 480  # one launch of a few ranks, on a machine shared with other jobs


def phase(out: Path, name: str) -> list[list[list[list[int]]]]:
    """What every rank trained in the phase just run (each rank and attempt's batches), its
    record moved into ``out/name`` so that the next phase writes its own."""
    keep = out / name
    keep.mkdir()
    found = []
    for path in sorted(out.glob("seen-*.json")):
        found.append(json.loads(path.read_text()))
        path.rename(keep / path.name)
    return found


def tally(trained: list[list[list[list[int]]]], size: int) -> np.ndarray:
    """Tokens per document value over every rank's batches."""
    return sum((counts([np.asarray(b) for b in batches], size) for batches in trained if batches),
               np.zeros(size, dtype=np.int64))


def check_once(name: str, phases: list[np.ndarray], expected: np.ndarray) -> dict[str, int]:
    """Over the phases in order, no document trained twice at any phase, and every one trained
    once by the last; the counts printed."""
    total = np.zeros_like(expected)
    twice = lost = 0
    for i, got in enumerate(phases):
        total += got
        twice = int((total > expected).sum())
        assert twice == 0, f"{name}: after phase {i}, trained twice: {np.flatnonzero(total > expected) - 1}"
    docs = expected[1:] > 0
    once = int(((total == expected)[1:] & docs).sum())
    lost = int(((total < expected)[1:] & docs).sum())
    summary = {"documents": int(docs.sum()), "trained": once, "lost": lost, "twice": twice,
               "per_phase": [int((got[1:] > 0).sum()) for got in phases]}
    print(f"\n{name}: {json.dumps(summary)}")
    assert lost == 0 and once == summary["documents"], summary
    return summary


def lineage(checkpoint: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "kafeed.cli.main", "lineage", str(checkpoint), "--json"],
                          capture_output=True, text=True, timeout=120, env=job_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    info: dict[str, Any] = json.loads(proc.stdout)
    return info


def check_lineage_covers_once(info: dict[str, Any], ends: dict[str, int], documents: int) -> None:
    """Every partition's records, from its first offset to its end, in one range; every
    document fully trained."""
    assert {key: entry["ranges"] for key, entry in info["partitions"].items()} == {
        key: [[0, end]] for key, end in ends.items()}
    assert info["documents"] == documents and info["documents_partly_trained"] == 0


def ends_of(topic: str, sizes: list[int]) -> dict[str, int]:
    return {f"{topic}:{p}": size for p, size in enumerate(sizes)}


def topic_of(kafka: ConnectionSettings, make_topic: TopicFactory, parts: list[int]) -> tuple[str, np.ndarray]:
    """A topic of ``len(parts)`` partitions holding ``parts[p]`` documents each, numbered on;
    the tokens expected per document value."""
    topic = make_topic(partitions=len(parts))
    expected = np.zeros(sum(parts) + 1, dtype=np.int64)
    first = 0
    for partition, count in enumerate(parts):
        got = produce_docs(kafka.bootstrap, topic, count, first=first, seed=partition, partition=partition)
        expected[:len(got)] += got
        first += count
    return topic, expected


def elapsed(t0: float) -> str:
    return f"{time.monotonic() - t0:.0f} s"


# -- elastic resume at another world size ---------------------------------------------------------


@pytest.mark.parametrize("resume_at", [2, 3])
def test_own_loop_saved_at_four_ranks_resumed_at_fewer_trains_every_record_once(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, resume_at: int) -> None:
    topic = make_topic(partitions=4)
    expected = produce_docs(kafka.bootstrap, topic, 400)
    t0 = time.monotonic()
    first = torchrun(job(kafka, topic, tmp_path, "own", steps=8, save_every=4), nproc=4, timeout=LAUNCH_S)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = phase(tmp_path, "at-4")
    assert [len(batches) for batches in saved] == [8] * 4
    doc = torch.load(tmp_path / "ckpt" / "ckpt.pt", weights_only=False)["loader"]
    assert doc["world_size"] == 4 and len(doc["ranks"]) == 4
    second = torchrun(job(kafka, topic, tmp_path, "own", steps=16, save_every=4, resume=True),
                      nproc=resume_at, timeout=LAUNCH_S)
    assert second.returncode == 0, second.stderr[-3000:]
    resumed = phase(tmp_path, f"at-{resume_at}")
    assert [len(batches) for batches in resumed] == [8] * resume_at
    last = launch(job(kafka, topic, tmp_path, "own", steps=ALL, save_every=ALL, resume=True, drain=True),
                  timeout=LAUNCH_S)
    assert last.returncode == 0, last.stderr[-3000:]
    rest = phase(tmp_path, "at-1")
    check_once(f"own 4 -> {resume_at} -> 1 ({elapsed(t0)})",
               [tally(p, len(expected)) for p in (saved, resumed, rest)], expected)


@pytest.mark.parametrize("path", ["hf", "lightning"])
def test_a_framework_job_saved_at_two_ranks_resumed_at_one_trains_every_record_once(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, path: str) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 300)
    t0 = time.monotonic()
    at_two = job(kafka, topic, tmp_path, path, steps=6, save_every=3, devices=2)
    first = torchrun(at_two, timeout=LAUNCH_S) if path == "hf" else launch(at_two, timeout=LAUNCH_S)
    assert first.returncode == 0, first.stderr[-3000:]
    saved = phase(tmp_path, "at-2")
    assert [len(batches) for batches in saved] == [6, 6]
    last = launch(job(kafka, topic, tmp_path, path, steps=ALL, save_every=50, resume=True, drain=True),
                  timeout=LAUNCH_S)
    assert last.returncode == 0, last.stderr[-3000:]
    rest = phase(tmp_path, "at-1")
    check_once(f"{path} 2 -> 1 ({elapsed(t0)})", [tally(p, len(expected)) for p in (saved, rest)], expected)


def train_cmd(kafka: ConnectionSettings, topic: str, ckpt: Path, *extra: str) -> list[str]:
    return ["-m", "kafeed.cli.main", "train", "--topic", topic, "--batch-size", "2", "--seq-len", "64",
            "--d-model", "32", "--n-layers", "1", "--checkpoint-dir", str(ckpt), "--keep", "100",
            "-b", kafka.bootstrap, "--json", "--resume", *extra]


def train_torchrun(nproc: int, *, max_restarts: int = 0) -> list[str]:
    return [str(TORCHRUN), "--standalone", "--nproc-per-node", str(nproc),
            "--max-restarts", str(max_restarts)]


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, Any] = json.loads(proc.stdout)  # rank 0 alone prints the job's summary
    return out


def test_kafeed_train_saved_at_two_ranks_resumed_at_one_trains_every_record_once(
        kafka: ConnectionSettings, make_topic: TopicFactory, shakespeare: Path, tmp_path: Path) -> None:
    topic = make_topic(partitions=4)
    texts = paragraphs(shakespeare)[:400]
    produce_documents(kafka, topic, texts, partitions=4)
    ckpt = tmp_path / "ck"
    t0 = time.monotonic()
    first = summary_of(subprocess.run(
        [*train_torchrun(2), *train_cmd(kafka, topic, ckpt, "--steps", "30", "--checkpoint-every", "15")],
        capture_output=True, text=True, timeout=LAUNCH_S, env=job_env()))
    assert first["steps"] == 30
    saved = CheckpointManager(ckpt).load_latest()
    assert saved is not None and saved.manifest["loader"]["world_size"] == 2
    last = summary_of(subprocess.run(
        [sys.executable, *train_cmd(kafka, topic, ckpt, "--steps", str(ALL), "--checkpoint-every", "0")],
        capture_output=True, text=True, timeout=LAUNCH_S, env=job_env()))
    assert str(last["resumed_from"]).endswith("step-00000030.pt") and last["steps"] < ALL
    info = lineage(ckpt)
    check_lineage_covers_once(info, ends_of(topic, [100] * 4), 400)
    print(f"\nkafeed train 2 -> 1 ({elapsed(t0)}): documents {info['documents']} of 400, steps "
          f"{first['steps']} at 2 ranks and {last['steps'] - first['steps']} at 1")


# -- a rank that dies -----------------------------------------------------------------------------


def rank_process(launcher: int, rank: int, marker: str) -> int | None:
    """The pid of the worker of ``rank`` below ``launcher`` whose command line holds ``marker``."""
    for pid in descendants(launcher):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in cmd and f"RANK={rank}".encode() in env:
            return pid
    return None


def watch(proc: subprocess.Popen[str], tree: set[int], until: Any, timeout: float) -> None:
    """Grow ``tree`` with every process below ``proc`` until ``until()`` or ``proc`` ends."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline and not until():
        tree |= descendants(proc.pid)
        time.sleep(0.05)


def test_kafeed_train_with_a_rank_sigkilled_restarts_from_the_last_complete_checkpoint(
        kafka: ConnectionSettings, make_topic: TopicFactory, shakespeare: Path, tmp_path: Path) -> None:
    topic = make_topic(partitions=4)
    produce_documents(kafka, topic, paragraphs(shakespeare)[:400], partitions=4)
    ckpt = tmp_path / "ck"
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [*train_torchrun(2, max_restarts=1),
         *train_cmd(kafka, topic, ckpt, "--steps", str(ALL), "--checkpoint-every", "10",
                    "--num-workers", "1")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job_env())
    tree: set[int] = set()
    try:
        watch(proc, tree, lambda: (ckpt / "step-00000020.json").exists(), 240)
        victim = rank_process(proc.pid, 1, "kafeed.cli.main")
        assert victim is not None, describe(descendants(proc.pid))
        tree |= descendants(proc.pid)
        os.kill(victim, signal.SIGKILL)
        killed_at = max(int(p.stem.split("-")[1]) for p in ckpt.glob("step-*.json"))
        watch(proc, tree, lambda: False, 300)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err[-3000:]
    summary = json.loads(out)
    resumed = int(Path(str(summary["resumed_from"])).stem.split("-")[1])
    assert 20 <= resumed <= killed_at + 10  # the newest checkpoint complete when the rank died
    left = wait_gone(tree, GONE_WITHIN_S)
    assert not left, f"alive after the job: {describe(left)}"
    last = summary_of(subprocess.run(
        [sys.executable, *train_cmd(kafka, topic, ckpt, "--steps", str(ALL), "--checkpoint-every", "0")],
        capture_output=True, text=True, timeout=LAUNCH_S, env=job_env()))
    info = lineage(ckpt)
    print(f"\nkafeed train, rank 1 SIGKILLed after step {killed_at}, resumed from step {resumed}, "
          f"{len(tree)} processes all gone ({elapsed(t0)}): documents {info['documents']} of 400, "
          f"final step {last['steps']}")
    check_lineage_covers_once(info, ends_of(topic, [100] * 4), 400)


def test_a_trainer_with_a_rank_sigkilled_restarts_from_the_last_complete_checkpoint(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    from kafeed.integrations.hf import STATE_FILE

    sizes = [100, 100, 100]
    topic, expected = topic_of(kafka, make_topic, sizes)
    t0 = time.monotonic()
    crash = {"step": 5, "rank": 1, "how": "kill"}
    proc = subprocess.Popen(
        [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "--max-restarts", "1",
         "-m", "tests.integration.ranks_job",
         json.dumps(job(kafka, topic, tmp_path, "hf", steps=ALL, save_every=2, drain=True, crash=crash))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job_env(), cwd=ROOT)
    tree: set[int] = set()
    try:
        watch(proc, tree, lambda: False, 400)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err[-3000:]
    left = wait_gone(tree, GONE_WITHIN_S)
    assert not left, f"alive after the job: {describe(left)}"
    attempts = phase(tmp_path, "at-2")  # r0-a0, r0-a1, r1-a0, r1-a1
    killed = [attempts[0][:4], attempts[2][:4]]  # checkpoint-4: what the restart resumed from
    assert len(attempts[2]) == 5  # rank 1 died in step 5
    last = launch(job(kafka, topic, tmp_path, "hf", steps=ALL, save_every=50, resume=True, drain=True),
                  timeout=LAUNCH_S)
    assert last.returncode == 0, last.stderr[-3000:]
    rest = phase(tmp_path, "at-1")
    final = max((tmp_path / "ckpt").glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    assert json.loads((final / STATE_FILE).read_text())["loader"]["world_size"] == 1
    info = lineage(final)
    check_once(f"hf, rank 1 SIGKILLed in step 5, {len(tree)} processes all gone ({elapsed(t0)})",
               [tally(p, len(expected)) for p in (killed, [attempts[1], attempts[3]], rest)], expected)
    check_lineage_covers_once(info, ends_of(topic, sizes), 300)


# -- ranks that run out unevenly ------------------------------------------------------------------

UNEVEN = [150, 40, 8]  # documents per partition of three


@pytest.mark.parametrize("path", ["hf", "lightning", "own"])
def test_two_ranks_over_three_uneven_partitions_both_finish(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, path: str) -> None:
    topic, expected = topic_of(kafka, make_topic, UNEVEN)
    t0 = time.monotonic()
    drain = job(kafka, topic, tmp_path, path, steps=ALL, save_every=50, drain=True, devices=2)
    proc = torchrun(drain, timeout=LAUNCH_S) if path != "lightning" else launch(drain, timeout=LAUNCH_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trained = phase(tmp_path, "at-2")
    assert len(trained) == 2 and all(trained)
    got = tally(trained, len(expected))
    assert not (got > expected).any()
    print(f"\n{path}, 2 ranks over partitions of {UNEVEN} documents: both finished in "
          f"{elapsed(t0)}, batches {[len(b) for b in trained]}, documents trained "
          f"{int((got[1:] == expected[1:]).sum())} of {len(expected) - 1}, twice 0")


def test_kafeed_train_two_ranks_over_three_uneven_partitions_both_finish(
        kafka: ConnectionSettings, make_topic: TopicFactory, shakespeare: Path, tmp_path: Path) -> None:
    topic = make_topic(partitions=3)
    texts = paragraphs(shakespeare)
    start = 0
    for partition, count in enumerate(UNEVEN):
        produce_documents(kafka, topic, texts[start:start + count], partitions=1, first_partition=partition)
        start += count
    t0 = time.monotonic()
    summary = summary_of(subprocess.run(
        [*train_torchrun(2), *train_cmd(kafka, topic, tmp_path / "ck", "--steps", str(ALL))],
        capture_output=True, text=True, timeout=LAUNCH_S, env=job_env()))
    assert 0 < summary["steps"] < ALL
    info = lineage(tmp_path / "ck")
    print(f"\nkafeed train, 2 ranks over uneven partitions: finished in {elapsed(t0)} at step "
          f"{summary['steps']}, documents {info['documents']} of {start}")
    owned = [sorted(r["partitions"]) for r in info["ranks"]]
    assert all(owned) and sorted(owned[0] + owned[1]) == [f"{topic}:{p}" for p in range(3)], owned


# -- two nodes ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_own_loop_on_two_nodes_resumed_at_one_trains_every_record_once(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=4)
    expected = produce_docs(kafka.bootstrap, topic, 400)
    port = free_port()
    spec = job(kafka, topic, tmp_path, "own", steps=8, save_every=4)
    t0 = time.monotonic()
    nodes = [subprocess.Popen(
        [str(TORCHRUN), "--nnodes", "2", "--node-rank", str(node), "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", tmp_path.name, "--nproc-per-node", "1",
         "-m", "tests.integration.ranks_job", json.dumps(spec)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job_env(), cwd=ROOT)
        for node in (0, 1)]
    try:
        errs = [node.communicate(timeout=300)[1] for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
                node.wait(30)
    assert [node.returncode for node in nodes] == [0, 0], errs[0][-2000:] + errs[1][-2000:]
    saved = phase(tmp_path, "two-nodes")
    assert [len(b) for b in saved] == [8, 8]
    doc = torch.load(tmp_path / "ckpt" / "ckpt.pt", weights_only=False)["loader"]
    owned = [sorted(key for r in state["readers"].values() for key in r["reader"]["partitions"])
             for state in doc["ranks"]]
    assert doc["world_size"] == 2 and all(owned)
    assert sorted(owned[0] + owned[1]) == [f"{topic}:{p}" for p in range(4)]  # each node its own
    last = launch(job(kafka, topic, tmp_path, "own", steps=ALL, save_every=ALL, resume=True, drain=True),
                  timeout=LAUNCH_S)
    assert last.returncode == 0, last.stderr[-3000:]
    rest = phase(tmp_path, "one-node")
    check_once(f"own, two nodes -> one ({elapsed(t0)}; node ranks' partitions {owned})",
               [tally(p, len(expected)) for p in (saved, rest)], expected)


# -- the Trainer under accelerate's launcher -----------------------------------------------------

def test_a_trainer_under_accelerate_launch_saves_every_ranks_state(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    from tests.integration.test_every_rank import uninterrupted

    topic = make_topic(partitions=3)
    produce_docs(kafka.bootstrap, topic, 300)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    accelerate = Path(sys.executable).with_name("accelerate")
    t0 = time.monotonic()
    # --multi_gpu is accelerate's torchrun launcher; on a machine without a GPU the ranks train
    # on the CPU (the job's TrainingArguments(use_cpu=True)).
    proc = subprocess.run(
        [str(accelerate), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--main_process_port", str(port), "--mixed_precision", "no", "--dynamo_backend", "no",
         "-m", "tests.integration.ranks_job", json.dumps(job(kafka, topic, tmp_path, "hf", steps=4))],
        capture_output=True, text=True, timeout=LAUNCH_S, env=job_env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(f"\naccelerate launch, 2 ranks: {elapsed(t0)}")
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"seen-r{rank}-a0.json").read_text())
        assert seen == uninterrupted(kafka, topic, rank, 2, 4)
    doc = json.loads((tmp_path / "ckpt" / "checkpoint-4" / "kafeed_loader.json").read_text())
    assert doc["loader"]["world_size"] == 2
    owned = sorted(key for state in doc["loader"]["ranks"] for r in state["readers"].values()
                   for key in r["reader"]["partitions"])
    assert owned == [f"{topic}:{p}" for p in range(3)]
