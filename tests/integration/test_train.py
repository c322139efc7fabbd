"""The reference trainers end to end on the real broker (CI-sized)."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.signals import stop_request
from kafeed.train.checkpoint import CheckpointManager
from kafeed.train.classifier import train_classifier
from kafeed.train.gpt import train_gpt
from kafeed.train.lineage import checkpoint_lineage
from kafeed.train.options import TrainOptions
from tests.integration.process_output import StderrLines as _Stderr
from tests.integration.train_data import paragraphs, produce_documents, produce_labelled
from tests.integration.train_runs import finish, kill_after_checkpoint


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    yield  # `kafeed train` run in-process installs the stop handler: give the signals back
    stop_request().uninstall()
    stop_request().reset()


@pytest.fixture(scope="module")
def corpus(shakespeare: Path) -> list[str]:
    return paragraphs(shakespeare)


@pytest.fixture
def tokens_topic(kafka: ConnectionSettings, make_topic, corpus: list[str]) -> str:
    topic = make_topic(partitions=3)
    produce_documents(kafka, topic, corpus[:600], partitions=3)
    return topic


def _train_cli(kafka: ConnectionSettings, topic: str, ckpt: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "kafeed.cli.main", "train", "--model", "gpt", "--topic", topic,
           "--steps", "40", "--batch-size", "4", "--seq-len", "64", "--d-model", "64",
           "--checkpoint-dir", str(ckpt), "--checkpoint-every", "10", "--keep", "10",
           "--log-every", "5", "--seed", "3", "-b", kafka.bootstrap, "--json", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})


def test_gpt_loss_falls(kafka: ConnectionSettings, tokens_topic: str, tmp_path: Path) -> None:
    options = TrainOptions(topic=tokens_topic, steps=40, batch_size=8, seq_len=64,
                           checkpoint_dir=tmp_path / "ck", checkpoint_every=20, log_every=10)
    result, describe = train_gpt(options, kafka, progress=lambda _l: None)
    assert result.steps == 40
    tail = sum(result.losses[-5:]) / 5
    assert result.first_loss is not None and tail < result.first_loss - 1.0, result.losses
    assert describe["vocab_size"] == 257 and result.tokens == 40 * 8 * 64


def test_classifier_trains_checkpoints_and_evaluates(kafka: ConnectionSettings, make_topic,
                                                      corpus: list[str], tmp_path: Path) -> None:
    # The short run of the classifier kept in the default suite (learning itself: below, slow).
    topic = make_topic(partitions=2)
    produce_labelled(kafka, topic, corpus[:300], [i % 2 for i in range(300)], partitions=2)
    options = TrainOptions(model="classifier", topic=topic, steps=6, batch_size=8, max_length=32,
                           checkpoint_dir=tmp_path / "ck", checkpoint_every=3, log_every=3)
    result, describe = train_classifier(options, kafka, progress=lambda _l: None)
    assert result.steps == 6 and result.final_loss is not None and math.isfinite(result.final_loss)
    assert sorted(p.name for p in (tmp_path / "ck").glob("step-*.pt")) == [
        "step-00000003.pt", "step-00000006.pt"]
    assert describe["held_out"] > 0 and 0.0 <= describe["accuracy"] <= 1.0


@pytest.mark.slow
def test_classifier_beats_chance(kafka: ConnectionSettings, make_topic, corpus: list[str],
                                 tmp_path: Path) -> None:
    # Which half of the collected plays a speech comes from: the speakers' names and
    # vocabulary give it away, so a fine-tuned encoder learns it in a few dozen steps.
    topic = make_topic(partitions=2)
    rng = random.Random(0)
    picks = rng.sample(range(len(corpus)), 1400)
    half = len(corpus) // 2
    produce_labelled(kafka, topic, [corpus[i] for i in picks], [int(i >= half) for i in picks],
                     partitions=2)
    options = TrainOptions(model="classifier", topic=topic, steps=70, batch_size=16, lr=1e-4,
                           warmup=5, max_length=48, checkpoint_dir=tmp_path / "ck",
                           checkpoint_every=0, log_every=10)
    _result, describe = train_classifier(options, kafka, progress=lambda _l: None)
    assert describe["held_out"] >= 60
    assert describe["accuracy"] >= describe["majority_rate"] + 0.1, describe


@pytest.mark.parametrize(("total", "kills"), [
    (40, (20,)),
    pytest.param(120, (20, 50, 80), marks=pytest.mark.slow),
])
def test_kill_and_resume_equals_uninterrupted(kafka: ConnectionSettings, tokens_topic: str,
                                              tmp_path: Path, total: int, kills: tuple[int, ...]) -> None:
    steps = ["--steps", str(total)]
    reference = finish(_train_cli(kafka, tokens_topic, tmp_path / "ref", *steps))
    assert reference["steps"] == total

    ckpt = tmp_path / "killed"
    rng = random.Random()
    for kill_after in kills:
        kill_after_checkpoint(_train_cli(kafka, tokens_topic, ckpt, "--resume", *steps), ckpt, kill_after,
                              10, rng)
    interrupted = CheckpointManager(ckpt).load_latest()
    assert interrupted is not None and interrupted.step < total
    resumed = finish(_train_cli(kafka, tokens_topic, ckpt, "--resume", *steps))
    assert resumed["steps"] == total and resumed["resumed_from"]

    ref_ck = CheckpointManager(tmp_path / "ref").load_latest()
    new_ck = CheckpointManager(ckpt).load_latest()
    assert ref_ck is not None and new_ck is not None and ref_ck.step == new_ck.step == total
    assert new_ck.manifest["loader"] == ref_ck.manifest["loader"]
    assert new_ck.manifest["lineage"] == ref_ck.manifest["lineage"]
    # same seed, same data in the same order: the same loss at the same step
    assert new_ck.manifest["loss"] == pytest.approx(ref_ck.manifest["loss"], abs=1e-5)
    assert resumed["final_loss"] == pytest.approx(reference["final_loss"], abs=1e-4)


def test_corrupt_newest_checkpoint_falls_back(kafka: ConnectionSettings, tokens_topic: str,
                                              tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    # The first run in this process, with _train_cli's settings: one start-up fewer.
    options = TrainOptions(topic=tokens_topic, steps=20, batch_size=4, seq_len=64, d_model=64,
                           checkpoint_dir=ckpt, checkpoint_every=10, keep=10, log_every=5, seed=3)
    first, _describe = train_gpt(options, kafka, progress=lambda _l: None)
    assert first.steps == 20
    newest = ckpt / "step-00000020.pt"
    newest.write_bytes(newest.read_bytes()[:1000])  # torn write
    proc = _train_cli(kafka, tokens_topic, ckpt, "--resume", "--steps", "20")
    summary = finish(proc)
    assert str(summary["resumed_from"]).endswith("step-00000010.pt")
    assert summary["steps"] == 20


def test_lineage_totals_equal_records_consumed(kafka: ConnectionSettings, make_topic,
                                               corpus: list[str], tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    produce_documents(kafka, topic, corpus[:150], partitions=2)
    options = TrainOptions(topic=topic, steps=10_000, batch_size=8, seq_len=64, d_model=32,
                           n_layers=1, checkpoint_dir=tmp_path / "ck", checkpoint_every=0)
    result, describe = train_gpt(options, kafka, progress=lambda _l: None)
    assert result.steps < 10_000  # the bounded topic ended the run
    info = checkpoint_lineage(tmp_path / "ck")
    assert info["documents"] == 150 == describe["loader_stats"]["records"]
    assert info["partitions"] == {
        f"{topic}:0": {"ranges": [[0, 75]], "next": 75, "start": 0},
        f"{topic}:1": {"ranges": [[0, 75]], "next": 75, "start": 0},
    }


def test_sigterm_checkpoints_and_exits_143(kafka: ConnectionSettings, tokens_topic: str,
                                           tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    proc = _train_cli(kafka, tokens_topic, ckpt, "--steps", "100000", "--checkpoint-every", "1000")
    stderr = _Stderr(proc)
    stderr.wait_for("step ")  # training is under way
    proc.send_signal(signal.SIGTERM)
    out, err = stderr.finish()
    assert proc.returncode == 143, err[-3000:]  # not 0: a scheduler requeues the job
    summary = json.loads(out)
    assert summary["stopped_by_signal"] is True
    step = int(summary["steps"])
    assert 0 < step < 100000 and summary["checkpoint"] == str(ckpt / f"step-{step:08d}.pt")
    assert "Stopped by SIGTERM" in err and "--resume" in err


def test_torchrun_two_ranks_one_checkpoint(kafka: ConnectionSettings, make_topic, corpus: list[str],
                                           tmp_path: Path) -> None:
    topic = make_topic(partitions=4)
    produce_documents(kafka, topic, corpus[:400], partitions=4)
    ckpt = tmp_path / "ck"
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "kafeed.cli.main",
         "train", "--topic", topic, "--steps", "12", "--batch-size", "2", "--seq-len", "64",
         "--d-model", "32", "--n-layers", "1", "--checkpoint-dir", str(ckpt), "--checkpoint-every", "6",
         "-b", kafka.bootstrap, "--json"],
        capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # rank 0 alone prints the job's summary
    assert summary["steps"] == 12 and summary["tokens_trained"] == 12 * 2 * 2 * 64
    assert sorted(p.name for p in ckpt.glob("*.pt")) == ["step-00000006.pt", "step-00000012.pt"]
    latest = CheckpointManager(ckpt).load_latest()
    assert latest is not None
    ranks = latest.manifest["loader"]["ranks"]  # every rank's state, as of its last batch
    assert latest.manifest["loader"]["world_size"] == 2 and len(ranks) == 2
    owned = [sorted(key for r in state["readers"].values() for key in r["reader"]["partitions"])
             for state in ranks]
    assert sorted(owned[0] + owned[1]) == [f"{topic}:{p}" for p in range(4)] and owned[0] and owned[1]
    lineage = latest.manifest["lineage"]["ranks"]
    assert [sorted(r["partitions"]) for r in lineage] == owned


def test_missing_topic_and_dead_broker_are_one_sentence(kafka: ConnectionSettings, tmp_path: Path) -> None:
    from kafeed.cli.main import main

    assert main(["train", "--topic", "no-such-topic", "-b", kafka.bootstrap,
                 "--checkpoint-dir", str(tmp_path / "ck")]) == 1
    with pytest.raises(TopicError, match="does not exist"):
        train_gpt(TrainOptions(topic="no-such-topic", checkpoint_dir=tmp_path / "ck"), kafka)
    assert not (tmp_path / "ck").exists()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_while_waiting_for_data_exits_promptly(kafka: ConnectionSettings, make_topic,
                                                      tmp_path: Path, sig: int, code: int) -> None:
    topic = make_topic(partitions=1)  # empty: a streaming trainer waits for records
    proc = _train_cli(kafka, topic, tmp_path / "ck", "--stream", "--steps", "10")
    stderr = _Stderr(proc)
    stderr.wait_for(f"train: waiting for data on topic {topic}")
    proc.send_signal(sig)
    t0 = time.monotonic()
    out, err = stderr.finish()
    assert time.monotonic() - t0 < 30
    assert proc.returncode == code, err[-3000:]
    summary = json.loads(out)
    assert summary["steps"] == 0 and summary["stopped_by_signal"] is True
    assert f"Stopped by {signal.Signals(sig).name}" in err and "--resume" in err
    assert "Traceback" not in err


def test_empty_topic_fails_instead_of_training_on_nothing(kafka: ConnectionSettings, make_topic,
                                                          tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from kafeed.cli.main import main

    topic = make_topic(partitions=2)
    assert main(["train", "--topic", topic, "-b", kafka.bootstrap, "--checkpoint-dir",
                 str(tmp_path / "ck"), "--json"]) == 1
    captured = capsys.readouterr()
    assert f"error: Topic '{topic}' is empty" in captured.err and "kafeed prepare" in captured.err
    assert "Traceback" not in captured.err and captured.out == ""  # no summary of a run that did nothing
    assert not (tmp_path / "ck").exists()


def test_wrong_record_type_fails_with_one_sentence(kafka: ConnectionSettings, make_topic, corpus: list[str],
                                                   tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    produce_labelled(kafka, topic, corpus[:40], [0] * 40, partitions=1)  # TrainingSamples, not tokens
    proc = _train_cli(kafka, topic, tmp_path / "ck")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err and topic in err and out == ""
    error_lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 1, err[-3000:]


def test_startup_opens_the_stream_ahead_only_for_a_single_reader(kafka: ConnectionSettings,
                                                                  tokens_topic: str, tmp_path: Path) -> None:
    from kafeed.train.startup import start

    single = start(TrainOptions(topic=tokens_topic, checkpoint_dir=tmp_path / "a"), kafka)
    assert single.stream is not None and single.opened_from is None
    assert single.tokenizer is not None and single.settings.eos_id == single.tokenizer.eos_id
    single.stream.close()
    workers = start(TrainOptions(topic=tokens_topic, num_workers=2, checkpoint_dir=tmp_path / "b"), kafka)
    assert workers.stream is None  # each DataLoader worker opens its own


def test_mixture_run_resumes_under_new_weights(kafka: ConnectionSettings, make_topic, corpus: list[str],
                                               tmp_path: Path) -> None:
    from kafeed.cli.main import main

    a, b = make_topic(partitions=1), make_topic(partitions=1)
    produce_documents(kafka, a, corpus[:300], partitions=1)
    produce_documents(kafka, b, corpus[300:600], partitions=1)
    base = ["train", "--steps", "20", "--batch-size", "8", "--seq-len", "31", "--d-model", "32",
            "--n-layers", "1", "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "20",
            "-b", kafka.bootstrap, "--json"]
    assert main([*base, "--mix", f"{a}=0.75,{b}=0.25"]) == 0
    first = checkpoint_lineage(tmp_path / "ck")["source_tokens"]
    assert first == {a: 120 * 32, b: 40 * 32}  # 160 windows of 32 tokens at 3:1
    base[2] = "40"
    assert main([*base, "--mix", f"{a}=0.25,{b}=0.75", "--resume"]) == 0
    info = checkpoint_lineage(tmp_path / "ck")
    assert info["step"] == 40 and info["source_tokens"] == {a: 160 * 32, b: 160 * 32}
